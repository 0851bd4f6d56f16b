// A real node for the kit's control plane: containerd (Debian's, with runc and the CNI bridge), a
// kubelet of the apiserver's release registered as `kit-node`, and kube-scheduler and kube-controller-manager for
// what a Deployment needs (ReplicaSets, EndpointSlices, ServiceAccounts, kube-root-ca.crt, the node's
// not-ready taint lifted). It runs in the test's own network namespace (kit/netns.ts), pods from
// images assembled here (image.ts), and leaves nothing behind (host.ts).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { binary } from '../binaries.ts';
import type { ControlPlane, ControlPlaneOptions } from '../control-plane.ts';
import { certKubeconfig, SCHEDULER_USER } from '../karpenter-controller.ts';
import { ManagedProcess, sleep } from '../process.ts';
import { cniConfig, containerdConfig, containerdSocket, kubeletConfig } from './configs.ts';
import { HostState, lockNode, NODE_ROOT_NAME, setUpNetwork, sweep, unmountUnder } from './host.ts';
import { type Image, pauseImage } from './image.ts';

export const NODE_ADDRESS = '192.168.77.1';
/** The node's IPv6 address when it runs dual-stack (NodeOptions.ipv6). */
export const NODE_ADDRESS_V6 = 'fd00:78::1';
export const NODE_NAME = 'kit-node';

/** Why this process cannot run the node, or undefined if it can: containerd, the kubelet's cgroups and mounts need root. */
export function realNodeRefusal(): string | undefined {
  return process.getuid?.() === 0 ? undefined : 'the real node needs root (containerd, cgroups, mounts)';
}

/** What the control plane needs to serve the node. */
export function nodeControlPlaneOptions(): ControlPlaneOptions {
  return { nodeAddress: NODE_ADDRESS };
}

export interface NodeOptions {
  /**
   * Dual-stack, IPv6 first, as on an IPv6 EKS cluster: pods get an address of each family and
   * their primary one (status.podIP, where the kubelet's probes go) is IPv6; the kubelet listens
   * and is reached at the node's IPv6 address. Services stay IPv4 (the apiserver's range).
   */
  ipv6?: boolean;
}

export interface NodeFigures {
  /** containerd started and the images imported. */
  runtimeMs: number;
  /** The kubelet started until the Node is Ready with no taint. */
  readyMs: number;
}

export class RealNode {
  readonly dir: string;
  readonly figures: NodeFigures = { runtimeMs: 0, readyMs: 0 };
  private readonly processes: ManagedProcess[] = [];
  private readonly before = new HostState();
  private stopped = false;
  private readonly cp: ControlPlane;
  private readonly unlock: () => void;
  private readonly ipv6: boolean;

  private constructor(cp: ControlPlane, unlock: () => void, opts: NodeOptions) {
    this.cp = cp;
    this.unlock = unlock;
    this.ipv6 = opts.ipv6 === true;
    const root = join(tmpdir(), NODE_ROOT_NAME);
    mkdirSync(root, { recursive: true });
    this.dir = mkdtempSync(join(root, `${process.pid}-`));
  }

  /** Starts the node for a control plane started with nodeControlPlaneOptions(), with `images` imported. */
  static async start(cp: ControlPlane, images: Image[], opts: NodeOptions = {}): Promise<RealNode> {
    const node = new RealNode(cp, await lockNode(), opts);
    cp.onStop(() => node.stop());
    try {
      await node.boot(images);
    } catch (err) {
      const logs = node.processes.map((p) => `--- ${p.name}:\n${p.logTail(40)}`).join('\n');
      await node.stop();
      throw new Error(`the real node did not come up: ${(err as Error).message}\n${logs}`);
    }
    return node;
  }

  private async boot(images: Image[]): Promise<void> {
    const started = Date.now();
    setUpNetwork(NODE_ADDRESS, this.cp.port, undefined, this.ipv6 ? NODE_ADDRESS_V6 : undefined);
    const pause = pauseImage();
    const file = (name: string, text: string) => {
      const path = join(this.dir, name);
      mkdirSync(join(path, '..'), { recursive: true });
      writeFileSync(path, text);
      return path;
    };
    const containerd = this.spawn('containerd', 'containerd', [
      '--config',
      file('containerd/config.toml', containerdConfig(this.dir, pause.ref)),
    ]);
    file('cni/net.d/10-kit.conflist', cniConfig(this.dir, { ipv6: this.ipv6 }));
    mkdirSync(join(this.dir, 'run'), { recursive: true });
    await this.until('containerd answers', containerd, () => this.ctrOk('version'));
    for (const image of [pause, ...images]) this.ctr('images', 'import', image.tar);
    this.figures.runtimeMs = Date.now() - started;

    const admin = this.cp.writeKubeConfig(this.cp.adminKubeConfig(), 'kubeconfig-kcm');
    const pki = join(this.cp.dir, 'pki');
    this.spawn('kube-controller-manager', binary('kubeControllerManager'), [
      `--kubeconfig=${admin}`,
      '--leader-elect=false',
      '--secure-port=0',
      `--service-account-private-key-file=${join(pki, 'sa.key')}`,
      `--root-ca-file=${join(pki, 'ca.crt')}`,
      '--use-service-account-credentials=false',
      '--controllers=*',
      // A node that stops reporting is marked at once, and its pods evicted soon, not after minutes.
      '--node-monitor-grace-period=20s',
    ]);
    this.spawn('kube-scheduler', binary('kubeScheduler'), [
      `--kubeconfig=${await certKubeconfig(this.cp, SCHEDULER_USER, [], 'kubeconfig-scheduler')}`,
      '--leader-elect=false',
      '--secure-port=0',
    ]);
    const kubeletStarted = Date.now();
    const kubelet = this.spawn('kubelet', binary('kubelet'), [
      // Dual-stack: the apiserver reaches the kubelet at the first --node-ip, the IPv6 one.
      `--config=${file('kubelet/config.yaml', kubeletConfig(this.dir, this.ipv6 ? '"::"' : NODE_ADDRESS))}`,
      `--kubeconfig=${await certKubeconfig(this.cp, `system:node:${NODE_NAME}`, ['system:nodes'], 'kubeconfig-kubelet')}`,
      `--root-dir=${join(this.dir, 'kubelet')}`,
      `--cert-dir=${join(this.dir, 'kubelet', 'pki')}`,
      `--hostname-override=${NODE_NAME}`,
      `--node-ip=${this.ipv6 ? `${NODE_ADDRESS_V6},${NODE_ADDRESS}` : NODE_ADDRESS}`,
    ]);
    const core = this.cp.adminKubeConfig().makeApiClient(k8s.CoreV1Api);
    await this.until('the node Ready and untainted', kubelet, async () => {
      const node = await core.readNode({ name: NODE_NAME }).catch(() => undefined);
      const ready = node?.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
      return ready && (node?.spec?.taints ?? []).length === 0;
    });
    this.figures.readyMs = Date.now() - kubeletStarted;
  }

  private spawn(name: string, bin: string, args: string[]): ManagedProcess {
    const proc = new ManagedProcess(name, bin, args, join(this.dir, `${name}.log`));
    proc.start();
    this.processes.push(proc);
    return proc;
  }

  private async until(what: string, proc: ManagedProcess, ready: () => Promise<boolean> | boolean): Promise<void> {
    const deadline = Date.now() + 120_000;
    while (!(await ready())) {
      if (!proc.running) throw new Error(`${proc.name} exited while waiting for ${what}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(100);
    }
  }

  /** containerd's own client, in the namespace the CRI keeps the pods' images and containers in. */
  ctr(...args: string[]): string {
    return execFileSync('ctr', ['--address', containerdSocket(this.dir), '--namespace', 'k8s.io', ...args], {
      encoding: 'utf8',
      stdio: 'pipe',
      timeout: 120_000,
    });
  }

  private ctrOk(...args: string[]): boolean {
    try {
      this.ctr(...args);
      return true;
    } catch {
      return false;
    }
  }

  /** The last lines a part of the node logged (kubelet, containerd, kube-controller-manager). */
  logTail(name: string, lines = 40): string {
    return this.processes.find((p) => p.name === name)?.logTail(lines) ?? '';
  }

  /**
   * The kubelet and kube-controller-manager first (nothing restarts a pod), then containerd;
   * what is left of the pods is swept.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const proc of this.processes.slice().reverse()) await proc.stop(5000);
    sweep(this.before);
    unmountUnder(this.dir);
    rmSync(this.dir, { recursive: true, force: true });
    this.unlock();
  }
}
