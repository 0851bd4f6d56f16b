// node-create (with webhook-share) and webhook-server: what the webhook costs node creation,
// measured side by side against no webhook and a null webhook (bare Fastify, same TLS, constant
// answer).
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { mutatingWebhookConfiguration } from '../kit/webhook-registration.ts';
import { freePort } from '../kit/control-plane.ts';
import { COMPILED_CLI } from '../kit/fleet.ts';
import { KarpenterSim } from '../kit/karpenter-sim.ts';
import { computeSavingsPlan, ec2InstanceSavingsPlan, karpenterNode, reservedInstance } from '../kit/veneer.ts';
import { startClusterEnv, WATCHER_USER, watcherFlags } from '../kit/watcher-env.ts';
import { median, quantile, type SuiteResult } from './stats.ts';
import { RUNTIME_NODE_FLAGS } from '../kit/node-flags.ts';

type Progress = (msg: string) => void;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ARM_LABEL = 'bench.veneer.io/arm';
const ARMS = ['none', 'null', 'ours'] as const;

function post(port: number, ca: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/mutate-node',
        method: 'POST',
        ca,
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        let data = '';
        res.on('data', (c) => (data += c));
        res.on('end', () => resolve(data));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function review(uid: string): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Node' },
      resource: { group: '', version: 'v1', resource: 'nodes' },
      operation: 'CREATE',
      userInfo: { username: 'system:node:x' },
      object: karpenterNode({ name: `review-${uid}`, instanceType: 'm5.xlarge' }),
    },
  });
}

async function autocannon(port: number, body: string, seconds: number): Promise<{ rps: number; p99: number }> {
  const bin = join(import.meta.dirname, '..', 'node_modules', 'autocannon', 'autocannon.js');
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      bin,
      '-c',
      '16',
      '-d',
      String(seconds),
      '-m',
      'POST',
      '-H',
      'content-type=application/json',
      '-b',
      body,
      '-j',
      `https://127.0.0.1:${port}/mutate-node`,
    ],
    {
      env: { ...process.env, NODE_TLS_REJECT_UNAUTHORIZED: '0', NODE_OPTIONS: '' },
      maxBuffer: 16 << 20,
    },
  );
  const r = JSON.parse(stdout) as {
    requests: { average: number };
    latency: { p99: number };
    non2xx: number;
    errors: number;
  };
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`autocannon saw ${r.non2xx} non-2xx and ${r.errors} errors`);
  return { rps: r.requests.average, p99: r.latency.p99 };
}

interface AdmissionBench {
  env: Awaited<ReturnType<typeof startClusterEnv>>;
  oursPort: number;
  nullPort: number;
  stop(): Promise<void>;
}

/** A control plane, our watcher as its own process, and the null webhook beside it. */
async function startAdmissionBench(): Promise<AdmissionBench> {
  const env = await startClusterEnv();
  const children: ChildProcess[] = [];
  const stop = async () => {
    for (const c of children) c.kill('SIGTERM');
    await env.cp.stop();
  };
  try {
    const custom = env.admin.makeApiClient(k8s.CustomObjectsApi);
    for (const o of [
      computeSavingsPlan(),
      ec2InstanceSavingsPlan('m5', 'us-west-2'),
      reservedInstance('m5.xlarge', 'us-west-2'),
    ]) {
      await custom.createClusterCustomObject({
        group: 'karpenter.sh',
        version: 'v1alpha1',
        plural: 'nodeoverlays',
        body: o,
      });
    }
    const flags = await watcherFlags(env.certs, { '--leader-election-enabled': 'false', '--log-level': 'warn' });
    const kubeconfig = env.cp.writeKubeConfig(env.cp.userKubeConfig(WATCHER_USER), 'bench-watcher');
    children.push(
      spawn(process.execPath, [...RUNTIME_NODE_FLAGS, COMPILED_CLI, 'serve', ...Object.entries(flags).flat()], {
        env: { ...process.env, KUBECONFIG: kubeconfig, NODE_OPTIONS: '' },
        stdio: 'ignore',
      }),
    );
    const oursPort = Number(flags['--webhook-port']);
    for (
      let i = 0;
      i < 600 &&
      !(await fetch(`http://127.0.0.1:${flags['--health-port']}/readyz`).then(
        (r) => r.ok,
        () => false,
      ));
      i++
    )
      await sleep(100);

    // The null webhook answers with exactly the body ours gives for a realistic review.
    const sample = await post(oursPort, env.certs.caPem, review('sample'));
    const bodyFile = join(env.cp.dir, 'null-body.json');
    writeFileSync(bodyFile, sample.replace('"sample"', '"__UID__"'));
    const nullPort = await freePort();
    children.push(
      spawn(
        process.execPath,
        [
          ...RUNTIME_NODE_FLAGS,
          join(import.meta.dirname, 'null-webhook.ts'),
          String(nullPort),
          env.certs.serving.certPath,
          env.certs.serving.keyPath,
          bodyFile,
        ],
        { stdio: 'ignore', env: { ...process.env, NODE_OPTIONS: '' } },
      ),
    );
    for (
      let i = 0;
      i < 100 &&
      !(await post(nullPort, env.certs.caPem, review('probe')).then(
        () => true,
        () => false,
      ));
      i++
    )
      await sleep(100);
    return { env, oursPort, nullPort, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

const r3 = (x: number) => Math.round(x * 1000) / 1000;
const spread = (xs: number[]) => `${r3(Math.min(...xs))}-${r3(Math.max(...xs))}`;

/** node-create and webhook-share: CREATE latency with no webhook, the null one and ours, interleaved. */
export async function runNodeCreateSuite(progress: Progress): Promise<SuiteResult> {
  const bench = await startAdmissionBench();
  try {
    const { env, oursPort, nullPort } = bench;
    const admin = env.admin;
    progress('node-create: registering the null and our webhook, each for its own arm');
    const api = admin.makeApiClient(k8s.AdmissionregistrationV1Api);
    for (const [arm, port] of [
      ['ours', oursPort],
      ['null', nullPort],
    ] as const) {
      const cfg = mutatingWebhookConfiguration({
        name: `bench-${arm}`,
        caBundle: env.certs.caPem,
        url: `https://127.0.0.1:${port}`,
        labelNamespace: 'veneer.io',
        timeoutSeconds: 5,
      });
      cfg.webhooks![0]!.matchConditions!.push({
        name: 'arm',
        expression: `object.metadata.labels['${ARM_LABEL}'] == '${arm}'`,
      });
      await api.createMutatingWebhookConfiguration({ body: cfg });
    }
    const sim = new KarpenterSim(admin);
    const core = admin.makeApiClient(k8s.CoreV1Api);
    for (let i = 0; i < 100; i++) {
      const probes = await Promise.all(
        ['ours', 'null'].map((arm) =>
          core.createNode({
            body: {
              metadata: {
                name: `probe-${arm}-${i}`,
                labels: {
                  'karpenter.sh/nodepool': 'p',
                  'karpenter.sh/capacity-type': 'on-demand',
                  'karpenter.sh/registered': 'true',
                  [ARM_LABEL]: arm,
                },
              },
            },
            dryRun: 'All',
          }),
        ),
      );
      if (probes.every((n) => n.metadata?.labels?.['veneer.io/overlay-influenced'] !== undefined)) break;
      await sleep(200);
    }

    const latencies: Record<string, number[]> = { none: [], null: [], ours: [] };
    let inline = 0;
    let oursCount = 0;
    const [blocks, perBlock, warmup] = [3, 100, 20];
    progress(
      `node-create: ${warmup} warm-up rounds, then ${blocks} blocks of ${perBlock} rounds of one CREATE per arm, arms shuffled each round`,
    );
    for (let i = 0; i < blocks * perBlock + warmup; i++) {
      const order = [...ARMS].sort(() => Math.random() - 0.5);
      for (const arm of order) {
        const name = `nc-${arm}-${i}`;
        await sim.createNodeClaim({ name, claimName: `${name}-claim`, instanceType: 'm5.xlarge' });
        const start = process.hrtime.bigint();
        const node = await core.createNode({
          body: karpenterNode({ name, stage: 'kubelet', extraLabels: { [ARM_LABEL]: arm } }) as k8s.V1Node,
        });
        const ms = Number(process.hrtime.bigint() - start) / 1e6;
        if (i < warmup) continue;
        latencies[arm]!.push(ms);
        if (arm === 'ours') {
          oursCount++;
          if (node.metadata?.labels?.['veneer.io/overlay-influenced'] !== undefined) inline++;
        }
      }
    }
    const p = (arm: string, q: number, block?: number) =>
      quantile(
        block === undefined ? latencies[arm]! : latencies[arm]!.slice(block * perBlock, (block + 1) * perBlock),
        q,
      );
    const blockRatios = (other: string, q: number) =>
      Array.from({ length: blocks }, (_, b) => p('ours', q, b) / p(other, q, b));
    return {
      keys: {
        create_ratio_vs_null_p50: r3(p('ours', 0.5) / p('null', 0.5)),
        create_ratio_vs_null_p99: r3(p('ours', 0.99) / p('null', 0.99)),
        create_ratio_vs_none_p50: r3(p('ours', 0.5) / p('none', 0.5)),
        inline_share: r3(inline / oursCount),
      },
      targets: {
        create_ratio_vs_null_p50: '<= 1.05',
        create_ratio_vs_null_p99: '<= 1.10',
        create_ratio_vs_none_p50: 'reported (aim <= 1.25)',
        inline_share: '>= 0.99',
      },
      table: [
        ...ARMS.map((arm) => ({
          what: `CREATE, ${arm} webhook`,
          p50_ms: r3(p(arm, 0.5)),
          p99_ms: r3(p(arm, 0.99)),
          n: latencies[arm]!.length,
          spread: '',
        })),
        // Ratio rows carry the median ratio in the column they compare, and no time.
        {
          what: `ours/null p50 ratio, per block of ${perBlock}`,
          p50_ms: r3(median(blockRatios('null', 0.5))),
          p99_ms: '-',
          n: blocks,
          spread: spread(blockRatios('null', 0.5)),
        },
        {
          what: `ours/null p99 ratio, per block of ${perBlock}`,
          p50_ms: '-',
          p99_ms: r3(median(blockRatios('null', 0.99))),
          n: blocks,
          spread: spread(blockRatios('null', 0.99)),
        },
        {
          what: `ours/none p50 ratio, per block of ${perBlock}`,
          p50_ms: r3(median(blockRatios('none', 0.5))),
          p99_ms: '-',
          n: blocks,
          spread: spread(blockRatios('none', 0.5)),
        },
      ],
      raw: { create_latency_ms: latencies, inline, ours_creates: oursCount },
    };
  } finally {
    await bench.stop();
  }
}

/** webhook-server: both HTTPS servers under autocannon, interleaved, with realistic reviews. */
export async function runWebhookServerSuite(progress: Progress): Promise<SuiteResult> {
  const bench = await startAdmissionBench();
  try {
    const { oursPort, nullPort } = bench;
    const rounds = 4;
    progress(`webhook-server: autocannon warm-up, then ${rounds} interleaved rounds of 5 s against each server`);
    const body = review('load');
    const load: Record<string, { rps: number; p99: number }[]> = { ours: [], null: [] };
    await autocannon(oursPort, body, 3);
    await autocannon(nullPort, body, 3);
    for (let round = 0; round < rounds; round++) {
      for (const [arm, port] of round % 2 === 0
        ? ([
            ['ours', oursPort],
            ['null', nullPort],
          ] as const)
        : ([
            ['null', nullPort],
            ['ours', oursPort],
          ] as const)) {
        load[arm]!.push(await autocannon(port, body, 5));
      }
    }
    const med = (arm: string, k: 'rps' | 'p99') => median((load[arm] ?? []).map((x) => x[k]));
    const perRound = (k: 'rps' | 'p99') => load.ours!.map((o, i) => o[k] / Math.max(load.null![i]![k], 1));
    return {
      keys: {
        server_throughput_ratio: r3(med('ours', 'rps') / med('null', 'rps')),
        server_p99_ratio: r3(med('ours', 'p99') / Math.max(med('null', 'p99'), 1)),
      },
      targets: { server_throughput_ratio: '>= 0.90', server_p99_ratio: '<= 1.20' },
      table: [
        ...(['ours', 'null'] as const).map((arm) => ({
          what: `HTTPS server, ${arm}`,
          req_per_s: Math.round(med(arm, 'rps')),
          p99_ms: med(arm, 'p99'),
          spread: '',
        })),
        {
          what: 'ours/null req/s ratio, per round',
          req_per_s: r3(median(perRound('rps'))),
          p99_ms: '-',
          spread: spread(perRound('rps')),
        },
        {
          what: 'ours/null p99 ratio, per round',
          req_per_s: '-',
          p99_ms: r3(median(perRound('p99'))),
          spread: spread(perRound('p99')),
        },
      ],
      raw: { autocannon: load },
    };
  } finally {
    await bench.stop();
  }
}
