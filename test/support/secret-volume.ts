// A Secret volume as the kubelet keeps it up to date (its AtomicWriter): each key is a file
// behind the `..data` symlink, which is swapped to a new timestamped directory in one rename,
// so a reader sees the old set of files or the new one, never a mix.
import { mkdirSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KeyPair } from '../../kit/pki.ts';

export class SecretVolume {
  readonly dir: string;
  private generation = 0;

  constructor(dir: string) {
    this.dir = dir;
    mkdirSync(dir, { recursive: true });
  }

  /** The volume's files, one per Secret key (the Secret's data, decoded). */
  write(files: Record<string, string | Buffer>): void {
    const data = `..${Date.now()}_${this.generation++}`;
    mkdirSync(join(this.dir, data));
    for (const [key, content] of Object.entries(files)) writeFileSync(join(this.dir, data, key), content);
    let previous: string | undefined;
    try {
      previous = readlinkSync(join(this.dir, '..data'));
    } catch {
      /* first write */
    }
    symlinkSync(data, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
    for (const key of Object.keys(files)) {
      try {
        symlinkSync(join('..data', key), join(this.dir, key));
      } catch {
        /* already links to ..data */
      }
    }
    if (previous) rmSync(join(this.dir, previous), { recursive: true, force: true });
  }

  path(key: string): string {
    return join(this.dir, key);
  }
}

/** A key pair on disk as the files of a `kubernetes.io/tls` Secret. */
export function tlsFiles(pair: KeyPair): Record<string, Buffer> {
  return { 'tls.crt': readFileSync(pair.certPath), 'tls.key': readFileSync(pair.keyPath) };
}
