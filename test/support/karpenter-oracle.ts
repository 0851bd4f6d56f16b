// A client for test/karpenter-oracle: Karpenter's own pkg/scheduling, built from the Go module
// proxy by scripts/control-plane.sh, asked one JSON line at a time.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { RequirementSpec } from '../../src/engine/requirements.ts';
import { binary } from '../../kit/control-plane.ts';

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

export class KarpenterOracle {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly waiting: { resolve: (line: string) => void; reject: (e: Error) => void }[] = [];
  private stderr = '';

  constructor(bin = binary('karpenterOracle')) {
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
