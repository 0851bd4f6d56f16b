// A client for test/karpenter-oracle: Karpenter's own pkg/scheduling, built from the Go module
// proxy by scripts/control-plane.sh, asked one JSON line at a time.
import { spawn, type ChildProcessWithoutNullStreams, execFileSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { existsSync } from 'node:fs';
import type { RequirementSpec } from '../../src/engine/requirements.ts';

export interface OracleOverlay {
  name: string;
  weight?: number;
  requirements: RequirementSpec[];
}

export interface OracleCase {
  overlays: OracleOverlay[];
  nodes: Record<string, string>[];
}

export interface OracleTables {
  normalizedLabels: Record<string, string>;
  normalizedLabelValues: Record<string, Record<string, string>>;
}

export function oraclePath(): string {
  const root = join(import.meta.dirname, '..', '..');
  const out = execFileSync('bash', [join(root, 'scripts', 'control-plane.sh'), '--print-env'], { encoding: 'utf8' });
  const path = /^VENEER_KARPENTER_ORACLE=(.*)$/m.exec(out)?.[1] ?? '';
  if (!existsSync(path)) throw new Error(`${path} is missing: run \`npm run control-plane\` to build the Karpenter oracle`);
  return path;
}

export class KarpenterOracle {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly waiting: { resolve: (line: string) => void; reject: (e: Error) => void }[] = [];
  private stderr = '';

  constructor(bin = oraclePath()) {
    this.child = spawn(bin, [], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stderr.on('data', (d: Buffer) => (this.stderr += d.toString()));
    createInterface({ input: this.child.stdout }).on('line', (line) => this.waiting.shift()?.resolve(line));
    this.child.on('exit', (code) => {
      for (const w of this.waiting.splice(0)) w.reject(new Error(`karpenter-oracle exited (${code}): ${this.stderr}`));
    });
  }

  private ask(request: unknown): Promise<string> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.child.stdin.write(`${JSON.stringify(request)}\n`);
    });
  }

  /** Per node, the overlay whose price Karpenter applies (null: none). */
  async winners(c: OracleCase): Promise<(string | null)[]> {
    return (JSON.parse(await this.ask(c)) as { winners: (string | null)[] }).winners;
  }

  async tables(): Promise<OracleTables> {
    return JSON.parse(await this.ask({ tables: true })) as OracleTables;
  }

  close(): void {
    this.child.stdin.end();
  }
}
