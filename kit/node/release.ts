// The project's chart installed with the real helm on the real node, as a user installs it: the
// image assembled here (pulled from nowhere: `imagePullPolicy: Never`), the pods pinned to the
// kit's node (the simulated nodes the tests create are Nodes too, which the scheduler would
// otherwise pick).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { binary } from '../binaries.ts';
import type { ControlPlane } from '../control-plane.ts';
import { REPO_ROOT } from '../dockerfile.ts';
import type { Image } from './image.ts';
import { NODE_NAME } from './node.ts';

export const CHART = join(REPO_ROOT, 'charts', 'veneer-node-watcher');
const run = promisify(execFile);

export interface ReleaseOptions {
  name?: string;
  namespace?: string;
}

export class ChartRelease {
  readonly name: string;
  readonly namespace: string;
  private readonly cp: ControlPlane;
  private readonly image: Image;
  private readonly apps: k8s.AppsV1Api;
  private readonly core: k8s.CoreV1Api;

  constructor(cp: ControlPlane, image: Image, opts: ReleaseOptions = {}) {
    this.cp = cp;
    this.image = image;
    this.name = opts.name ?? 'veneer-node-watcher';
    this.namespace = opts.namespace ?? 'veneer-system';
    this.apps = cp.adminKubeConfig().makeApiClient(k8s.AppsV1Api);
    this.core = cp.adminKubeConfig().makeApiClient(k8s.CoreV1Api);
  }

  /** helm as admin; rejects with helm's own words. */
  async helm(args: string[]): Promise<string> {
    const home = join(this.cp.dir, 'helm');
    const { stdout } = await run(binary('helm'), args, {
      env: {
        ...process.env,
        KUBECONFIG: this.cp.writeKubeConfig(),
        HELM_CACHE_HOME: home,
        HELM_CONFIG_HOME: home,
        HELM_DATA_HOME: home,
      },
      maxBuffer: 1 << 24,
    }).catch((err: { stderr?: string; message: string }) => {
      throw new Error(`helm ${args[0]}: ${err.stderr?.trim() || err.message}`);
    });
    return stdout;
  }

  /** `helm install --wait`: every replica Ready, or helm says why not. */
  install(sets: string[] = [], chart = CHART): Promise<string> {
    return this.helm(['install', this.name, chart, '-n', this.namespace, '--create-namespace', ...this.flags(sets)]);
  }

  /**
   * `helm upgrade --wait` with the values given before and `sets` on top, as the docs say to
   * upgrade: `--reset-then-reuse-values` renders the new chart's defaults under them
   * (`--reuse-values` would render it with the old chart's defaults).
   */
  upgrade(sets: string[] = [], chart = CHART): Promise<string> {
    return this.helm([
      'upgrade',
      this.name,
      chart,
      '-n',
      this.namespace,
      '--reset-then-reuse-values',
      ...this.flags(sets),
    ]);
  }

  /**
   * `helm test`: the chart's test hooks run against the release; helm's report. Not `--logs`: a
   * passed test pod is deleted (its hook's policy) before helm would read its logs.
   */
  test(): Promise<string> {
    return this.helm(['test', this.name, '-n', this.namespace, '--timeout', '3m']);
  }

  uninstall(): Promise<string> {
    return this.helm(['uninstall', this.name, '-n', this.namespace, '--wait', '--timeout', '2m']);
  }

  private flags(sets: string[]): string[] {
    const [repository, tag] = this.image.ref.split(/:(?=[^:]+$)/);
    return [
      '--wait',
      '--timeout',
      '3m',
      '--set',
      'nodeWatcher.enabled=true',
      '--set',
      `image.repository=${repository}`,
      '--set',
      `image.tag=${tag}`,
      '--set',
      'image.pullPolicy=Never',
      '--set',
      `nodeSelector.kubernetes\\.io/hostname=${NODE_NAME}`,
      ...sets.flatMap((s) => ['--set', s]),
    ];
  }

  /** The release's pods, running or not. */
  async pods(): Promise<k8s.V1Pod[]> {
    const list = await this.core.listNamespacedPod({
      namespace: this.namespace,
      labelSelector: `app.kubernetes.io/instance=${this.name}`,
    });
    return list.items;
  }

  async deployment(): Promise<k8s.V1Deployment> {
    return this.apps.readNamespacedDeployment({ name: this.name, namespace: this.namespace });
  }

  /**
   * A command in the watcher's container, as `kubectl exec` runs it (the apiserver streams it from
   * the kubelet); its output and exit status.
   */
  async exec(pod: string, command: string[]): Promise<{ stdout: string; stderr: string; status: string }> {
    const out = { stdout: '', stderr: '' };
    const sink = (key: 'stdout' | 'stderr') =>
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          out[key] += chunk.toString();
          done();
        },
      });
    const status = await new Promise<string>((resolve, reject) => {
      new k8s.Exec(this.cp.adminKubeConfig())
        .exec(this.namespace, pod, 'watcher', command, sink('stdout'), sink('stderr'), null, false, (s) =>
          resolve(s.status ?? 'Unknown'),
        )
        .catch(reject);
    });
    return { ...out, status };
  }

  /** Who holds the leader Lease (the pod's name and a suffix), if anyone. */
  async leader(): Promise<string | undefined> {
    const lease = await this.cp
      .adminKubeConfig()
      .makeApiClient(k8s.CoordinationV1Api)
      .readNamespacedLease({ name: this.name, namespace: this.namespace })
      .catch(() => undefined);
    return lease?.spec?.holderIdentity || undefined;
  }
}
