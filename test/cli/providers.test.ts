// `explain` and `report` through the real entry point on a KWOK cluster's files: with the default
// (auto) they find the provider as the watcher does, from each NodeClaim's nodeClassRef.group, and
// say which and why; set to a provider the NodeClaims contradict, they say so, loudly, and every
// decision they give is approximate.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import type { Explanation, Report } from '../../src/engine/index.ts';
import { computeSavingsPlan, validatedByKarpenter } from '../../kit/veneer.ts';

const cli = join(import.meta.dirname, '..', '..', 'src', 'cli.ts');
const run = (args: string[]) =>
  promisify(execFile)(process.execPath, [cli, ...args]).then(
    (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout, err: e.stderr }),
  );

const dir = mkdtempSync(join(tmpdir(), 'providers-cli-'));
const LAUNCH = '2026-11-30T05:00:00Z';
const list = (kind: string, items: unknown[]) =>
  JSON.stringify({ apiVersion: 'v1', kind: 'List', items: items.map((i) => ({ kind, ...(i as object) })) });
const kwokLabels = (name: string) => ({
  'karpenter.sh/nodepool': 'default',
  'karpenter.sh/capacity-type': 'on-demand',
  'node.kubernetes.io/instance-type': 'm5.xlarge',
  'karpenter.kwok.sh/instance-family': 'm5',
  'karpenter.kwok.sh/instance-size': 'xlarge',
  'kubernetes.io/hostname': name,
});
const nodes = ['kwok-a', 'kwok-b'].map((name) => ({
  metadata: { name, creationTimestamp: LAUNCH, labels: kwokLabels(name) },
  spec: { providerID: `kwok://${name}` },
}));
const claims = ['kwok-a', 'kwok-b'].map((name) => ({
  metadata: { name: `${name}-claim`, creationTimestamp: LAUNCH, labels: kwokLabels(name) },
  spec: { nodeClassRef: { group: 'karpenter.kwok.sh', kind: 'KWOKNodeClass', name: 'default' } },
  status: { providerID: `kwok://${name}`, nodeName: name },
}));
const overlay = validatedByKarpenter(
  {
    ...computeSavingsPlan('kwok'),
    metadata: { ...computeSavingsPlan('kwok').metadata, creationTimestamp: '2026-11-30T04:00:00Z' },
  },
  '2026-11-30T04:00:01Z',
);
const pools = [
  {
    metadata: { name: 'default', creationTimestamp: '2026-11-30T00:00:00Z' },
    spec: { template: { metadata: { labels: {} } } },
  },
];
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
const files = [
  '--nodes',
  file('nodes.json', list('Node', nodes)),
  '--overlays',
  file('overlays.json', list('NodeOverlay', [overlay])),
  '--nodepools',
  file('nodepools.json', list('NodePool', pools)),
  '--nodeclaims',
  file('claims.json', list('NodeClaim', claims)),
];

t.test('explain, auto: the provider each NodeClaim names, and why', async (t) => {
  const r = await run(['explain', ...files]);
  t.equal(r.code, 0, r.err);
  t.match(r.out, /^kwok-a: influenced by cost-aware-compute-sp-global/);
  t.match(r.out, /^ {2}provider: kwok \(from its NodeClaim's nodeClassRef\.group karpenter\.kwok\.sh\)$/m);
  t.notMatch(r.out, /WARNING/);
  const json = JSON.parse((await run(['explain', ...files, '-o', 'json'])).out) as Explanation[];
  t.match(json[0], {
    outcome: 'influenced',
    provider: { name: 'kwok', from: 'nodeclaim', group: 'karpenter.kwok.sh' },
  });
  const noClaims = await run(['explain', ...files.slice(0, 6)]);
  t.match(
    noClaims.out,
    /^ {2}provider: kwok \(from the domain of its labels; its NodeClaim is unknown\)$/m,
    "without the NodeClaims: the node's labels",
  );
});

t.test('explain, set to aws against KWOK NodeClaims: a warning, and the basis is approximate', async (t) => {
  const r = await run(['explain', '--karpenter-provider', 'aws', ...files]);
  t.equal(r.code, 0, r.err);
  t.match(
    r.out,
    /^kwok-a: not influenced: no active overlay matched \(launch .*, basis approximate\)$/m,
    "aws's keys leave karpenter.kwok.sh/instance-family undefined",
  );
  t.match(
    r.out,
    /^ {2}provider: aws \(from karpenterProvider\)\n {2}WARNING: karpenterProvider is aws, but NodeClaim kwok-a-claim belongs to kwok \(nodeClassRef\.group karpenter\.kwok\.sh\): Karpenter compared kwok's keys, this decision used aws's; basis approximate$/m,
  );
});

t.test('report: the NodeClaims by provider, and the warnings', async (t) => {
  const auto = await run(['report', ...files]);
  t.equal(auto.code, 0, auto.err);
  t.match(auto.out, /^Karpenter provider: auto, from each NodeClaim's nodeClassRef\.group \(NodeClaims: kwok 2\)$/m);
  t.notMatch(auto.out, /WARNING/);
  t.match(auto.out, /^cost-aware-compute-sp-global +10 .* 2 +0 .* steering$/m, 'both nodes won');
  const wrong = await run(['report', '--karpenter-provider', 'aws', ...files]);
  t.match(
    wrong.out,
    /^Karpenter provider: aws, set by karpenterProvider \(NodeClaims: kwok 2 \(not karpenterProvider\)\)$/m,
  );
  t.match(
    wrong.out,
    /^WARNING: karpenterProvider is aws, but 2 NodeClaims belong to kwok \(nodeClassRef\.group karpenter\.kwok\.sh\): their nodes are recorded with basis approximate; set karpenterProvider to auto or kwok$/m,
  );
  t.match(
    wrong.out,
    /^WARNING: 2 on-demand Karpenter nodes are judged with a provider in doubt \(basis approximate\): explain NODE says why$/m,
  );
  const other = claims.map((c) => ({
    ...c,
    spec: { nodeClassRef: { group: 'karpenter.example.com', kind: 'X', name: 'default' } },
  }));
  const unknown = await run([
    'report',
    '-o',
    'json',
    ...files.slice(0, 6),
    '--nodeclaims',
    file('other.json', list('NodeClaim', other)),
  ]);
  const report = JSON.parse(unknown.out) as Report;
  t.match(report.provider, {
    setting: 'auto',
    unknownGroups: [{ group: 'karpenter.example.com', nodeClaims: 2 }],
    nodesInDoubt: 2,
    warnings: [/^2 NodeClaims name nodeClassRef\.group karpenter\.example\.com, a provider the watcher does not know/],
  });
  const table = await run(['report', ...files.slice(0, 6), '--nodeclaims', join(dir, 'other.json')]);
  t.match(
    table.out,
    /^Karpenter provider: auto, from each NodeClaim's nodeClassRef\.group \(NodeClaims: unknown 2 \(keys unknown\)\)$/m,
  );
  const one = await run([
    'report',
    ...files.slice(0, 6),
    '--nodeclaims',
    file('one.json', list('NodeClaim', other.slice(0, 1))),
  ]);
  t.match(
    one.out,
    /^WARNING: 1 on-demand Karpenter node is judged with a provider in doubt/m,
    'one node in doubt: the other is told by its labels',
  );
  const none = await run(['report', ...files.slice(0, 6)]);
  t.match(none.out, /^Karpenter provider: auto, from each NodeClaim's nodeClassRef\.group \(NodeClaims: none\)$/m);
});
