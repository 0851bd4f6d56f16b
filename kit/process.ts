// Child processes for the local control plane: each dies with the process that started it,
// however that one dies (setpriv --pdeathsig), and its output goes to a log file.
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request as httpRequest } from 'node:http';
import { createServer } from 'node:net';

/**
 * Below the kernel's ephemeral range, where no outgoing connection takes a port for itself.
 * A port the kernel hands out for port 0 is one of that range, and between this check and the
 * program that binds it later, any connection on a busy machine could take it: that made
 * kube-apiserver exit with "address already in use" during a full npm test.
 */
const PORTS = { from: 20_000, to: 32_000 } as const;

/**
 * Ports handed out, by any process of this machine: a file a port, holding the pid that took it,
 * kept until that process ends. A port handed out is free until its program binds it, and free
 * again while the program is stopped: a test that stopped its etcd for five seconds found, on
 * starting it again, its port taken by a test file running beside it ("address already in use"),
 * and the file hung. Within one process, the three ports of one watcher once came out as two
 * equal ones, and its start was refused ("must differ").
 */
const RESERVED = join(tmpdir(), 'veneer-ports');
const ownReservations: string[] = [];

/** Takes `port` for this process unless a living process holds it. */
function reserve(port: number): boolean {
  mkdirSync(RESERVED, { recursive: true });
  const file = join(RESERVED, String(port));
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
      if (ownReservations.length === 0) process.once('exit', releaseReservations);
      ownReservations.push(file);
      return true;
    } catch {
      // Taken: by a living process, or left by one killed before it could give it back. An empty
      // file is one being written.
      let holder: number;
      try {
        holder = Number(readFileSync(file, 'utf8').trim() || Number.NaN);
      } catch {
        continue;
      }
      if (Number.isNaN(holder) || holder === process.pid || isAlive(holder)) return false;
      rmSync(file, { force: true });
    }
  }
  return false;
}

function releaseReservations(): void {
  for (const file of ownReservations) rmSync(file, { force: true });
}

/** A port on 127.0.0.1 nothing listens on now, outside the ephemeral range, handed out to no living process before. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = PORTS.from + Math.floor(Math.random() * (PORTS.to - PORTS.from));
    if ((await canListen(port)) && reserve(port)) return port;
  }
  throw new Error(`no free port on 127.0.0.1 between ${PORTS.from} and ${PORTS.to} after 100 tries`);
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether a process of this pid is alive (signal 0 only asks). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export class ManagedProcess {
  readonly name: string;
  private readonly bin: string;
  private readonly args: string[];
  private readonly logPath: string;
  private readonly env: NodeJS.ProcessEnv;
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();

  constructor(name: string, bin: string, args: string[], logPath: string, env: NodeJS.ProcessEnv = process.env) {
    this.name = name;
    this.bin = bin;
    this.args = args;
    this.logPath = logPath;
    this.env = env;
  }

  start(): void {
    const log = createWriteStream(this.logPath, { flags: 'a' });
    // setpriv makes the kernel kill the child when this process dies, however it dies.
    const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', this.bin, ...this.args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: this.env,
    });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
  }

  /** The program's own pid (setpriv execs it), while it runs. */
  get pid(): number | undefined {
    return this.running ? this.child?.pid : undefined;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  async stop(graceMs = 5000): Promise<void> {
    if (!this.running) return;
    this.child?.kill('SIGTERM');
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  killNow(): void {
    if (this.running) this.child?.kill('SIGKILL');
  }

  logTail(lines = 30): string {
    try {
      return readFileSync(this.logPath, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }
}

export function httpGet(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { timeout: 2000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}
