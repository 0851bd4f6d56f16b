import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ConfigError, loadConfig } from '../../src/config/load.ts';
import { formatDuration, parseDuration } from '../../src/config/duration.ts';
import { envName, flagName } from '../../src/config/schema.ts';

const dir = mkdtempSync(join(tmpdir(), 'veneer-config-'));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
const problems = (fn: () => unknown): string[] => {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
};

t.test('defaults are the documented ones', async (t) => {
  const { config, sources } = loadConfig({});
  t.match(config, {
    enabled: false,
    labelNamespace: 'veneer.io',
    overlayCacheTTLMs: 60_000,
    maxConcurrentReconciles: 5,
    gracePeriodMs: 60_000,
    historyRetentionMs: 3_600_000,
  });
  t.match(config.webhook, { port: 9443, deadlineMs: 500 });
  t.same(
    config.metrics,
    { port: 8443, secure: true, authCacheTTLMs: 60_000, maxOverlaySeries: 300 },
    'metrics over HTTPS behind authentication by default',
  );
  t.same(config.health, { port: 8081 });
  t.match(config.leaderElection, { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2000 });
  t.same(sources.enabled, { kind: 'default' });
});

t.test('the contracted names of variables and flags', async (t) => {
  t.equal(envName('enabled'), 'VENEER_NODE_WATCHER_ENABLED');
  t.equal(envName('labelNamespace'), 'VENEER_NODE_WATCHER_LABEL_NAMESPACE');
  t.equal(envName('overlayCacheTTL'), 'VENEER_NODE_WATCHER_OVERLAY_CACHE_TTL');
  t.equal(envName('maxConcurrentReconciles'), 'VENEER_NODE_WATCHER_MAX_CONCURRENT_RECONCILES');
  t.equal(envName('webhook.certFile'), 'VENEER_NODE_WATCHER_WEBHOOK_CERT_FILE');
  t.equal(flagName('overlayCacheTTL'), '--overlay-cache-ttl');
  t.equal(flagName('leaderElection.leaseName'), '--leader-election-lease-name');
  t.equal(envName('metrics.secure'), 'VENEER_NODE_WATCHER_METRICS_SECURE');
  t.equal(flagName('metrics.authCacheTTL'), '--metrics-auth-cache-ttl');
  t.equal(envName('health.port'), 'VENEER_NODE_WATCHER_HEALTH_PORT');
});

t.test('precedence: flags > environment > file > defaults, with the source of each value', async (t) => {
  const f = file(
    'p.yaml',
    'nodeWatcher:\n  enabled: true\n  maxConcurrentReconciles: 7\n  labelNamespace: file.example.com\n  overlayCacheTTL: 30s\n',
  );
  const { config, sources } = loadConfig({
    file: f,
    env: { VENEER_NODE_WATCHER_MAX_CONCURRENT_RECONCILES: '9', VENEER_NODE_WATCHER_LABEL_NAMESPACE: 'env.example.com' },
    flags: { '--label-namespace': 'flag.example.com' },
  });
  t.equal(config.enabled, true);
  t.equal(config.maxConcurrentReconciles, 9);
  t.equal(config.labelNamespace, 'flag.example.com');
  t.equal(config.overlayCacheTTLMs, 30_000);
  t.same(sources.enabled, { kind: 'file', file: f, line: 2 });
  t.same(sources.maxConcurrentReconciles, { kind: 'env', name: 'VENEER_NODE_WATCHER_MAX_CONCURRENT_RECONCILES' });
  t.same(sources.labelNamespace, { kind: 'flag', name: '--label-namespace' });
  t.same(loadConfig({ flags: { '--instance-type-keys': 'example.com/a, example.com/b' } }).config.instanceTypeKeys, [
    'example.com/a',
    'example.com/b',
  ]);
});

t.test('every error at once, each with field, source, value and rule', async (t) => {
  const f = file(
    'bad.yaml',
    [
      'nodeWatcher:',
      '  enabled: yes please',
      '  labelNamespace: Veneer_IO',
      '  overlayCacheTTL: 2h',
      '  maxConcurrentReconciles: 0',
      '  overlaySelector: "a in b"',
      '  webhook:',
      '    port: 70000',
      '    typo: 1',
      '',
    ].join('\n'),
  );
  const found = problems(() =>
    loadConfig({
      file: f,
      env: { VENEER_NODE_WATCHER_GRACE_PERIOD: '5x' },
      flags: { '--metrics-port': 'abc', '--nope': '1' },
    }),
  );
  const expected = [
    /^unknown flag --nope$/,
    new RegExp(`^nodeWatcher.enabled = "yes please" \\(from ${f} line 2\\): must be boolean$`),
    new RegExp(`^nodeWatcher.labelNamespace = "Veneer_IO" \\(from ${f} line 3\\): must be a DNS subdomain`),
    new RegExp(`^nodeWatcher.overlayCacheTTL = "2h" \\(from ${f} line 4\\): must be between 1s and 1h$`),
    new RegExp(`^nodeWatcher.maxConcurrentReconciles = 0 \\(from ${f} line 5\\): must be >= 1$`),
    /^nodeWatcher.overlaySelector = "a in b" .*must be a label selector/,
    /^nodeWatcher.gracePeriod = "5x" \(from environment variable VENEER_NODE_WATCHER_GRACE_PERIOD\): must be a duration such as 500ms/,
    new RegExp(`^nodeWatcher.webhook.port = 70000 \\(from ${f} line 8\\): must be <= 65535$`),
    /^nodeWatcher.metrics.port = "abc" \(from flag --metrics-port\): must be integer$/,
  ];
  t.equal(found.length, expected.length, found.join('\n'));
  for (const re of expected)
    t.ok(
      found.some((p) => re.test(p)),
      `reported: ${re}`,
    );
});

t.test('unreadable or malformed files are reported, not thrown raw', async (t) => {
  t.match(
    problems(() => loadConfig({ file: join(dir, 'missing.yaml') })),
    [/^config file .*missing.yaml: cannot be read/],
  );
  t.match(
    problems(() => loadConfig({ file: file('broken.yaml', 'nodeWatcher: [\n') })),
    [/^config file .*broken.yaml: /],
  );
});

t.test('a key this version does not know is warned about and ignored: a file of another version loads', async (t) => {
  // A rollout runs both versions on one ConfigMap, and a pod of either may restart on the other's file.
  const f = file(
    'newer.yaml',
    [
      'nodeWatcher:',
      '  enabled: true',
      '  aSettingOfANewerVersion: 3',
      '  webhook:',
      '    typo: 1',
      'other: 1',
      '',
    ].join('\n'),
  );
  const loaded = loadConfig({ file: f });
  t.equal(loaded.config.enabled, true, 'the rest is read');
  t.same(loaded.warnings, [
    `nodeWatcher.aSettingOfANewerVersion (from ${f} line 3) is not a setting of this version: ignored`,
    `nodeWatcher.webhook.typo (from ${f} line 5) is not a setting of this version: ignored`,
    `other (from ${f} line 6) is not a setting of this version: ignored`,
  ]);
  t.same(loadConfig({ file: file('plain.yaml', 'nodeWatcher:\n  enabled: true\n') }).warnings, []);
  t.match(
    problems(() => loadConfig({ file: file('both.yaml', 'nodeWatcher:\n  enabled: maybe\n  unknown: 1\n') })),
    [/^nodeWatcher.enabled = "maybe" .*must be boolean$/],
    'a known key with a bad value still stops start-up; the unknown one alone does not',
  );
});

t.test('durations', async (t) => {
  t.equal(parseDuration('500ms'), 500);
  t.equal(parseDuration('1h30m'), 5_400_000);
  t.equal(parseDuration('1.5s'), 1500);
  t.equal(parseDuration('60'), undefined);
  t.equal(parseDuration(''), undefined);
  t.equal(formatDuration(3_600_000), '1h');
  t.equal(formatDuration(120_000), '2m');
  t.equal(formatDuration(5000), '5s');
  t.equal(formatDuration(250), '250ms');
});

t.test('leader election timings must nest as client-go requires', async (t) => {
  const found = problems(() =>
    loadConfig({ flags: { '--leader-election-renew-deadline': '20s', '--leader-election-retry-period': '30s' } }),
  );
  t.match(found, [
    /leaseDuration \(15s, from default\) must be longer than renewDeadline \(20s, from flag --leader-election-renew-deadline\)/,
    /renewDeadline \(20s, from flag --leader-election-renew-deadline\) must be longer than retryPeriod \(30s, from flag --leader-election-retry-period\)/,
  ]);
});

t.test('metrics settings: the switch, the cache TTL bounds, and ports that must differ', async (t) => {
  t.equal(loadConfig({ env: { VENEER_NODE_WATCHER_METRICS_SECURE: 'false' } }).config.metrics.secure, false);
  t.match(
    problems(() => loadConfig({ flags: { '--metrics-secure': 'off', '--metrics-auth-cache-ttl': '1h' } })),
    [
      /^nodeWatcher.metrics.secure = "off" \(from flag --metrics-secure\): must be boolean$/,
      /^nodeWatcher.metrics.authCacheTTL = "1h" \(from flag --metrics-auth-cache-ttl\): must be between 1s and 10m$/,
    ],
  );
  t.same(
    problems(() =>
      loadConfig({ env: { VENEER_NODE_WATCHER_HEALTH_PORT: '9443' }, flags: { '--metrics-port': '9443' } }),
    ),
    [
      'nodeWatcher.webhook.port (9443, from default) and nodeWatcher.metrics.port (9443, from flag --metrics-port) must differ',
      'nodeWatcher.webhook.port (9443, from default) and nodeWatcher.health.port (9443, from environment variable VENEER_NODE_WATCHER_HEALTH_PORT) must differ',
      'nodeWatcher.metrics.port (9443, from flag --metrics-port) and nodeWatcher.health.port (9443, from environment variable VENEER_NODE_WATCHER_HEALTH_PORT) must differ',
    ],
  );
});

t.test('the mode and the hold: record and hold by default, observe by variable, a wrong mode named', async (t) => {
  t.match(loadConfig({}).config, { mode: 'record', holdWhileNoOverlaySelected: true });
  t.match(
    loadConfig({ env: { VENEER_NODE_WATCHER_MODE: 'observe' }, flags: { '--hold-while-no-overlay-selected': 'false' } })
      .config,
    { mode: 'observe', holdWhileNoOverlaySelected: false },
  );
  t.match(
    problems(() => loadConfig({ flags: { '--mode': 'dry-run' } })),
    [/^nodeWatcher.mode = "dry-run" \(from flag --mode\): must be one of record, observe$/],
  );
});

t.test('the overlay series cap and the Events settings: defaults, each source, and bounds', async (t) => {
  t.match(loadConfig({}).config, { metrics: { maxOverlaySeries: 300 }, events: { enabled: true, ratePerSecond: 10 } });
  const f = file('events.yaml', 'nodeWatcher:\n  metrics:\n    maxOverlaySeries: 50\n  events:\n    enabled: false\n');
  t.match(loadConfig({ file: f, env: { VENEER_NODE_WATCHER_EVENTS_RATE_PER_SECOND: '25' } }).config, {
    metrics: { maxOverlaySeries: 50 },
    events: { enabled: false, ratePerSecond: 25 },
  });
  t.match(
    problems(() =>
      loadConfig({
        env: { VENEER_NODE_WATCHER_METRICS_MAX_OVERLAY_SERIES: '0' },
        flags: { '--events-enabled': 'no', '--events-rate-per-second': '5000' },
      }),
    ),
    [
      /^nodeWatcher.metrics.maxOverlaySeries = 0 \(from environment variable VENEER_NODE_WATCHER_METRICS_MAX_OVERLAY_SERIES\): must be >= 1$/,
      /^nodeWatcher.events.enabled = "no" \(from flag --events-enabled\): must be boolean$/,
      /^nodeWatcher.events.ratePerSecond = 5000 \(from flag --events-rate-per-second\): must be <= 1000$/,
    ],
  );
});

t.test(
  "what Karpenter compares and when an overlay counts: the provider, its extra keys, Karpenter's validation",
  async (t) => {
    t.match(
      loadConfig({}).config,
      { requireOverlayReady: true, karpenterProvider: 'auto', instanceTypeKeys: [] },
      'counted once Karpenter validated it; the provider each NodeClaim names',
    );
    const { config } = loadConfig({
      env: {
        VENEER_NODE_WATCHER_KARPENTER_PROVIDER: 'kwok',
        VENEER_NODE_WATCHER_INSTANCE_TYPE_KEYS: 'example.com/a, example.com/b',
      },
      flags: { '--require-overlay-ready': 'false' },
    });
    t.match(config, {
      karpenterProvider: 'kwok',
      instanceTypeKeys: ['example.com/a', 'example.com/b'],
      requireOverlayReady: false,
    });
    t.match(
      loadConfig({ file: file('provider.yaml', 'nodeWatcher:\n  karpenterProvider: aws\n') }).config,
      { karpenterProvider: 'aws' },
      'from the file',
    );
    t.match(
      loadConfig({ env: { VENEER_NODE_WATCHER_KARPENTER_PROVIDER: 'kwok' }, flags: { '--karpenter-provider': 'auto' } })
        .config,
      { karpenterProvider: 'auto' },
      'a flag over the environment',
    );
    t.match(
      problems(() => loadConfig({ flags: { '--karpenter-provider': 'gcp' } })),
      ['nodeWatcher.karpenterProvider = "gcp" (from flag --karpenter-provider): must be one of auto, aws, kwok'],
    );
  },
);

t.test('keys that are not settings, the prototype names among them, are ignored by name', async (t) => {
  const loaded = loadConfig({
    file: file('proto.yaml', 'nodeWatcher:\n  __proto__:\n    polluted: yes\n  constructor: 1\n  logLevel: debug\n'),
  });
  t.match(loaded.warnings, [/^nodeWatcher\.__proto__ .*: ignored$/, /^nodeWatcher\.constructor .*: ignored$/]);
  t.equal(loaded.config.logLevel, 'debug');
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'the shared prototype is untouched');
  t.match(loadConfig({ file: file('proto-top.yaml', '__proto__:\n  logLevel: debug\n') }).warnings, [
    /^__proto__ .*: ignored$/,
  ]);
});

t.test('a section of the wrong shape is an error that names it, whatever else sets values in it', async (t) => {
  const scalar = file('scalar.yaml', 'nodeWatcher: 5\n');
  for (const more of [{}, { env: { [envName('logLevel')]: 'debug' } }, { flags: { [flagName('logLevel')]: 'debug' } }])
    t.match(
      problems(() => loadConfig({ file: scalar, ...more })),
      [/^nodeWatcher = 5 \(from .*scalar\.yaml line 1\): must be object$/],
      JSON.stringify(more),
    );
  t.match(
    problems(() =>
      loadConfig({
        file: file('list.yaml', 'nodeWatcher:\n  webhook: [1, 2]\n'),
        env: { [envName('webhook.port')]: '9443' },
      }),
    ),
    [/^nodeWatcher\.webhook = \[1,2\] \(from .*list\.yaml line 2\): must be object$/],
  );
});

t.test('random YAML gives a configuration or a ConfigError, never another error', async (t) => {
  const fc = (await import('fast-check')).default;
  const { stringify } = await import('yaml');
  const key = fc.constantFrom('nodeWatcher', 'webhook', 'port', 'logLevel', 'prices', '__proto__', 'constructor', 'x');
  const value = fc.letrec((tie) => ({
    node: fc.oneof(
      { depthSize: 'small' },
      fc.jsonValue({ maxDepth: 1 }),
      fc.dictionary(key, tie('node'), { maxKeys: 3 }),
    ),
  })).node;
  let n = 0;
  fc.assert(
    fc.property(value, fc.boolean(), (doc, withEnv) => {
      const path = file(`random-${n++}.yaml`, stringify(doc));
      try {
        loadConfig({ file: path, ...(withEnv ? { env: { [envName('webhook.port')]: '9443' } } : {}) });
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
      }
      return ({} as Record<string, unknown>).polluted === undefined;
    }),
    { numRuns: 300 },
  );
  t.pass('300 random documents');
});
