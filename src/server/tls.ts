// Serving certificate from files (what cert-manager mounts), switched without a restart when
// the files change: a directory watch reacts at once, a poll catches what watches miss
// (Secret volumes swap a symlink). New connections get the new certificate. One reloader
// serves every HTTPS listener that uses the pair (the webhooks and the metrics endpoint), so
// they always present the same certificate.
import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import type { SecureContextOptions } from 'node:tls';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.ts';

const TLS_MIN_VERSION = 'TLSv1.2';

interface KeyPairFiles {
  certFile: string;
  keyFile: string;
}

interface LoadedKeyPair {
  cert: string;
  key: string;
  notAfter: number;
  fingerprint: string;
}

/** Reads and checks a key pair; the error names the file and the problem, never the key. */
export function loadKeyPair(files: KeyPairFiles): LoadedKeyPair {
  let cert: string;
  let key: string;
  try {
    cert = readFileSync(files.certFile, 'utf8');
  } catch (err) {
    throw new Error(
      `cannot read serving certificate ${files.certFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  try {
    key = readFileSync(files.keyFile, 'utf8');
  } catch (err) {
    throw new Error(
      `cannot read serving key ${files.keyFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch {
    throw new Error(`${files.certFile} is not a PEM certificate`);
  }
  let matches: boolean;
  try {
    matches = x509.checkPrivateKey(createPrivateKey(key));
  } catch {
    throw new Error(`${files.keyFile} is not a PEM private key`);
  }
  if (!matches) throw new Error(`${files.keyFile} does not belong to the certificate in ${files.certFile}`);
  return {
    cert,
    key,
    notAfter: Date.parse(x509.validTo),
    fingerprint: createHash('sha256').update(cert).update(key).digest('hex'),
  };
}

export function secureContextOptions(pair: LoadedKeyPair): SecureContextOptions {
  return { cert: pair.cert, key: pair.key, minVersion: TLS_MIN_VERSION };
}

export interface ReloadTarget {
  setSecureContext(options: SecureContextOptions): void;
}

export class CertificateReloader {
  private current: LoadedKeyPair;
  private readonly files: KeyPairFiles;
  private readonly metrics: Metrics;
  private readonly log: Logger;
  private readonly pollMs: number;
  private readonly targets = new Set<ReloadTarget>();
  private timer: NodeJS.Timeout | undefined;
  private watchers: FSWatcher[] = [];

  constructor(files: KeyPairFiles, metrics: Metrics, log: Logger, pollMs = 10_000) {
    this.files = files;
    this.metrics = metrics;
    this.log = log;
    this.pollMs = pollMs;
    this.current = loadKeyPair(files);
    metrics.certExpiry.set(this.current.notAfter / 1000);
  }

  get keyPair(): LoadedKeyPair {
    return this.current;
  }

  /** Serves `target` from now on; the returned function stops that. Watching runs while any target is attached. */
  attach(target: ReloadTarget): () => void {
    this.targets.add(target);
    if (this.targets.size === 1) this.watch();
    return () => {
      this.targets.delete(target);
      if (this.targets.size === 0) this.stop();
    };
  }

  private watch(): void {
    this.timer = setInterval(() => this.reload(), this.pollMs);
    this.timer.unref();
    for (const dir of new Set([dirname(this.files.certFile), dirname(this.files.keyFile)])) {
      try {
        const w = watch(dir, () => this.reload());
        w.on('error', () => w.close());
        w.unref();
        this.watchers.push(w);
      } catch {
        // The poll still catches changes.
      }
    }
  }

  /** Loads the files again and switches when they changed and are a valid pair. */
  reload(): boolean {
    let next: LoadedKeyPair;
    try {
      next = loadKeyPair(this.files);
    } catch (err) {
      // Half-written files during a rotation are normal; the next event or poll retries.
      this.metrics.certReloads.inc({ result: 'error' });
      this.log.warn({ err: (err as Error).message }, 'serving certificate not reloaded; keeping the current one');
      return false;
    }
    if (next.fingerprint === this.current.fingerprint) return false;
    try {
      for (const target of this.targets) target.setSecureContext(secureContextOptions(next));
    } catch (err) {
      // A chain whose later certificates are still half written passes loadKeyPair but not
      // the TLS layer: keep serving the current one, the next event or poll retries.
      this.metrics.certReloads.inc({ result: 'error' });
      this.log.warn({ err: (err as Error).message }, 'serving certificate not reloaded; keeping the current one');
      return false;
    }
    this.current = next;
    this.metrics.certExpiry.set(next.notAfter / 1000);
    this.metrics.certReloads.inc({ result: 'success' });
    this.log.info({ notAfter: new Date(next.notAfter).toISOString() }, 'serving certificate reloaded');
    return true;
  }

  /** Stops watching the files (targets keep the pair they have). */
  stop(): void {
    clearInterval(this.timer);
    for (const w of this.watchers) w.close();
    this.watchers = [];
  }
}
