// The provider as the cluster's NodeClaims show it: the NodeClaim cache counts them by
// nodeClassRef.group as they come, change and go; the watch warns once per provider in doubt
// (an unknown group, or one karpenterProvider contradicts) and exports
// veneer_nodewatcher_karpenter_provider_nodeclaims{provider, matches_setting} at each scrape.
import { Writable } from 'node:stream';
import t from 'tap';
import {
  KNOWN_PROVIDERS,
  MAX_UNKNOWN_GROUPS,
  recordKeys,
  toNodeClaimView,
  type EngineSettings,
  type NodeClaimView,
} from '../../../src/engine/index.ts';
import { AWS_KEYS } from '../../../src/engine/providers.ts';
import { createLogger } from '../../../src/log.ts';
import { createMetrics } from '../../../src/metrics.ts';
import { ProviderWatch } from '../../../src/controllers/gauges/providers.ts';
import { NodeClaimCache } from '../../../src/state/caches.ts';
import type { KubeClient } from '../../../src/kube/client.ts';
import type { ReflectorHandlers } from '../../../src/kube/reflector-options.ts';

const AWS_GROUP = 'karpenter.k8s.aws';
const KWOK_GROUP = 'karpenter.kwok.sh';
const base = { keys: recordKeys('veneer.io'), gracePeriodMs: 60_000, knownProviders: KNOWN_PROVIDERS };
const claim = (name: string, group?: string): NodeClaimView =>
  toNodeClaimView({
    metadata: { name },
    ...(group ? { spec: { nodeClassRef: { group, kind: 'NodeClass', name: 'default' } } } : {}),
    status: { providerID: `p://${name}` },
  });

function logged() {
  const lines: { level: number; msg: string; group?: string; provider?: string; karpenterProvider?: string }[] = [];
  const log = createLogger(
    'info',
    new Writable({
      write(chunk, _e, done) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        done();
      },
    }),
  );
  return { log, lines, warnings: () => lines.filter((l) => l.level === 40) };
}

const series = (text: string) =>
  [
    ...text.matchAll(
      /^veneer_nodewatcher_karpenter_provider_nodeclaims\{provider="(\w+)",matches_setting="(\w+)"\} (\d+)$/gm,
    ),
  ].map((m) => `${m[1]} ${m[2]} ${m[3]}`);

t.test('the NodeClaim cache counts NodeClaims by group as they come, change and go', async (t) => {
  const cache = new NodeClaimCache({
    client: {} as KubeClient,
    metrics: createMetrics(),
    log: logged().log,
    now: () => 0,
  });
  const { handlers } = (cache.reflector as unknown as { o: { handlers: ReflectorHandlers<NodeClaimView> } }).o;
  const seen: string[] = [];
  cache.subscribe((c) => seen.push(c.name));
  handlers.upsert(claim('a', KWOK_GROUP), 0);
  handlers.upsert(claim('b', KWOK_GROUP), 0);
  handlers.upsert(claim('c', AWS_GROUP), 0);
  handlers.upsert(claim('d'), 0);
  t.same(
    [...cache.groups],
    [
      [KWOK_GROUP, 2],
      [AWS_GROUP, 1],
    ],
    'a NodeClaim without a group is not counted',
  );
  handlers.upsert(claim('a', KWOK_GROUP), 0);
  t.same(
    [...cache.groups],
    [
      [KWOK_GROUP, 2],
      [AWS_GROUP, 1],
    ],
    'the same NodeClaim again counts once',
  );
  handlers.upsert(claim('c', KWOK_GROUP), 0);
  t.same([...cache.groups], [[KWOK_GROUP, 3]], 'a changed group moves it; an empty count goes');
  handlers.remove(claim('a', KWOK_GROUP), 0);
  handlers.upsert(claim('b'), 0);
  handlers.remove(claim('zz', AWS_GROUP), 0);
  t.same([...cache.groups], [[KWOK_GROUP, 1]], 'removed, or its group gone');
  t.equal(seen.length, 7, 'listeners still hear every upsert');
  t.equal(cache.byProviderID('p://c')?.nodeClassGroup, KWOK_GROUP);
});

t.test(
  'auto: every known provider matches; an unknown group is warned about once and exported as unknown',
  async (t) => {
    const metrics = createMetrics();
    const { log, lines, warnings } = logged();
    const groups = new Map<string, number>();
    const watch = new ProviderWatch({ settings: { ...base, provider: 'auto' }, groups, metrics, log });
    t.same(
      series(await metrics.registry.metrics()),
      ['aws true 0', 'kwok true 0', 'unknown false 0'],
      'every provider has a series, 0 included',
    );
    groups.set(KWOK_GROUP, 3).set('karpenter.azure.com', 2);
    for (const c of [
      claim('a', KWOK_GROUP),
      claim('b', KWOK_GROUP),
      claim('x', 'karpenter.azure.com'),
      claim('y', 'karpenter.azure.com'),
      claim('n'),
    ])
      watch.seen(c);
    t.same(
      series(await metrics.registry.metrics()),
      ['aws true 0', 'kwok true 3', 'unknown false 2'],
      'computed at the scrape',
    );
    t.equal(warnings().length, 1, 'one warning for the unknown group, however many NodeClaims name it');
    t.match(warnings()[0], {
      group: 'karpenter.azure.com',
      karpenterProvider: 'auto',
      msg: /a cloud provider the watcher does not know: which keys Karpenter compares overlays with is unknown, so their nodes are recorded with basis approximate/,
    });
    t.match(
      lines.filter((l) => l.level === 30),
      [
        {
          provider: 'kwok',
          msg: 'NodeClaims of the kwok provider (karpenter.kwok.sh): their nodes are judged with its keys',
        },
      ],
      'the provider found, said once',
    );
    t.notMatch(JSON.stringify(lines), /"(a|b|x|y)"/, 'no NodeClaim names in the logs');
    t.same(watch.census().assumed, 'kwok');
  },
);

t.test('an explicit setting the NodeClaims contradict: a warning once, matches_setting="false"', async (t) => {
  const metrics = createMetrics();
  const { log, warnings, lines } = logged();
  const groups = new Map([
    [KWOK_GROUP, 4],
    [AWS_GROUP, 1],
  ]);
  const settings: EngineSettings = { ...base, provider: AWS_KEYS };
  const watch = new ProviderWatch({ settings, groups, metrics, log });
  for (const c of [claim('a', KWOK_GROUP), claim('b', KWOK_GROUP), claim('c', AWS_GROUP)]) watch.seen(c);
  t.same(series(await metrics.registry.metrics()), ['aws true 1', 'kwok false 4', 'unknown false 0']);
  t.equal(warnings().length, 1);
  t.match(warnings()[0], {
    karpenterProvider: 'aws',
    provider: 'kwok',
    group: KWOK_GROUP,
    msg: "karpenterProvider is aws, but NodeClaims belong to kwok (spec.nodeClassRef.group karpenter.kwok.sh): their nodes are judged with aws's keys and recorded with basis approximate; set karpenterProvider to auto or kwok",
  });
  t.match(
    lines.filter((l) => l.level === 30),
    [{ provider: 'aws' }],
    'the agreeing provider: info',
  );
});

t.test('unknown groups are named in the logs up to a bound, then once more in total', async (t) => {
  const { log, warnings } = logged();
  const watch = new ProviderWatch({
    settings: { ...base, provider: 'auto' },
    groups: new Map(),
    metrics: createMetrics(),
    log,
  });
  for (let i = 0; i < MAX_UNKNOWN_GROUPS + 5; i++) watch.seen(claim(`c${i}`, `g${i}.example.com`));
  watch.seen(claim('again', 'g0.example.com'));
  t.equal(warnings().length, MAX_UNKNOWN_GROUPS + 1, 'each of the first groups, then one line for the rest');
  t.match(warnings().at(-1)?.msg, /more than 10 unknown nodeClassRef groups; no more are logged/);
  const { log: log2 } = logged();
  t.doesNotThrow(
    () =>
      new ProviderWatch({
        settings: { keys: base.keys, gracePeriodMs: 1, provider: 'auto' },
        groups: new Map(),
        metrics: createMetrics(),
        log: log2,
      }).census(),
    'knownProviders unset: the known ones',
  );
});
