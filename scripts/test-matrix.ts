// `npm run test:matrix`: the suites that touch the Kubernetes API surface, once per
// kube-apiserver version we claim, each built into the cache like the default
// (scripts/control-plane.sh with VENEER_K8S_VERSION). Writes test/matrix/results.md and
// results.json: version x suite, pass, fail with the first failure, or not supported with the
// reason; then real Karpenter of each version in KARPENTER_VERSIONS on the default Kubernetes.
// `npm run test:matrix -- v1.30.14 ...` runs only the Kubernetes versions named,
// `-- --karpenter-only` only the Karpenter ones.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const outDir = join(root, 'test', 'matrix');

/** The versions we claim: the oldest, every other minor up to the default, and the newest served. */
export const KUBERNETES_VERSIONS = ['v1.30.14', 'v1.32.13', 'v1.34.4', 'v1.35.4', 'v1.37.2'];
export const DEFAULT_VERSION = 'v1.35.4';
/** Real Karpenter (its KWOK provider) in the loop, each on the default Kubernetes version. */
export const KARPENTER_VERSIONS = ['v1.14.3', 'v1.15.0'];
const KARPENTER_SUITE: Suite = {
  name: 'real Karpenter',
  covers:
    "test/karpenter/: Karpenter's own overlay statuses, 100 concurrent launches per path, what it compares, the launch time; each record against the judge of the same version",
  files: [
    'test/karpenter/statuses.test.ts',
    'test/karpenter/launches.test.ts',
    'test/karpenter/compares.test.ts',
    'test/karpenter/launch-time.test.ts',
  ],
};
/**
 * Real Karpenter with its AWS provider against the local EC2 (kit/aws), on the default Kubernetes
 * version: the releases of github.com/aws/karpenter-provider-aws whose modules the proxy serves.
 */
export const AWS_KARPENTER_VERSIONS = ['v1.14.3'];
/** Releases that cannot be built here, and why (named in the table). */
export const AWS_KARPENTER_UNBUILDABLE: Record<string, string> = {
  'v1.15.0':
    'not buildable here: the Go module proxy refuses sigs.k8s.io/karpenter v1.15.1, aws-sdk-go-v2/service/timestreamwrite v1.43.1 and service/fis v1.46.1 (403)',
  'v1.15.2':
    'not buildable here: the Go module proxy refuses sigs.k8s.io/karpenter v1.15.1, aws-sdk-go-v2/service/timestreamwrite v1.43.1 and service/fis v1.46.1 (403)',
};
const AWS_SUITE: Suite = {
  name: 'real Karpenter on AWS',
  covers:
    "test/aws/: the spot-to-on-demand flip and its CreateFleet, 100 concurrent launches recorded at CREATE, Karpenter's overlay statuses on the AWS CRDs; each record against the judge",
  files: ['test/aws/flip.test.ts', 'test/aws/launches.test.ts', 'test/aws/statuses.test.ts'],
};
/** cert-manager v1.21's own statement of the Kubernetes versions it supports. */
const CERT_MANAGER = { version: 'v1.21.2', minMinor: 33, maxMinor: 36 };

interface Suite {
  name: string;
  covers: string;
  files: string[];
  /** Needs cert-manager's controllers: judged only where cert-manager supports the version. */
  certManager?: boolean;
}

const ALL_SUITES: Suite[] = [
  {
    name: 'webhooks',
    covers:
      'the mutating webhook through the apiserver: inline record at CREATE and in the registration update, a record carried at CREATE replaced, the opt-out, matchConditions, dry-run',
    files: ['test/apiserver/webhook.test.ts'],
  },
  {
    name: 'record guard',
    covers:
      'the ValidatingAdmissionPolicy: a record altered through the node or nodes/status refused to the kubelet, a ServiceAccount and system:masters, the identities allowed, the watcher down',
    files: ['test/apiserver/record-guard.test.ts'],
  },
  {
    name: 'reconciler',
    covers: 'the reconciler with leader election (Leases), records about the past',
    files: ['test/apiserver/reconciler.test.ts'],
  },
  {
    name: 'watches',
    covers: 'label-selected and PartialObjectMetadata watches, resume from a resourceVersion after a cut, relists',
    files: ['test/apiserver/reflector.test.ts', 'test/apiserver/node-cache.test.ts'],
  },
  {
    name: 'events + report',
    covers: 'events.k8s.io/v1 Events on nodes, report live',
    files: ['test/apiserver/overlays-report.test.ts'],
  },
  {
    name: 'metrics auth',
    covers: 'metrics behind TokenReview and SubjectAccessReview',
    files: ['test/apiserver/metrics-auth.test.ts'],
  },
  {
    name: 'install',
    covers: "helm install, cert-manager's own controllers, the Service-routed webhook in a network namespace",
    files: ['test/packaging/install.test.ts'],
    certManager: true,
  },
];

const onlySuite = process.env.VENEER_MATRIX_SUITE;
const SUITES = onlySuite ? ALL_SUITES.filter((s) => s.name === onlySuite) : ALL_SUITES;

type Outcome =
  | { result: 'pass' }
  | { result: 'fail'; firstFailure: string }
  | { result: 'not supported'; reason: string };

interface Row {
  version: string;
  buildSeconds: number;
  runSeconds: number;
  suites: Record<string, Outcome & { seconds?: number }>;
}

const minor = (v: string) => Number(v.split('.')[1]);

function build(version: string): number {
  const started = Date.now();
  execFileSync('bash', [join(root, 'scripts', 'control-plane.sh'), 'etcd', 'kube-apiserver'], {
    stdio: 'inherit',
    env: { ...process.env, VENEER_K8S_VERSION: version },
  });
  return Math.round((Date.now() - started) / 1000);
}

/** Runs tap on the suite's files against `version`; the first `not ok` line names the failure. */
function run(
  suite: Suite,
  version: string,
  extraEnv: Record<string, string> = {},
): Promise<Outcome & { seconds: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(
      join(root, 'node_modules', '.bin', 'tap'),
      ['--disable-coverage', '--reporter=tap', ...suite.files],
      {
        // npm puts node_modules/.bin (Node 24) first on the PATH of its scripts; so does this, run directly or not.
        cwd: root,
        env: {
          ...process.env,
          PATH: `${join(root, 'node_modules', '.bin')}:${process.env.PATH ?? ''}`,
          VENEER_K8S_VERSION: version,
          ...extraEnv,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (code) => {
      const seconds = Math.round((Date.now() - started) / 1000);
      if (process.env.VENEER_MATRIX_DEBUG) console.log(out.slice(-3000));
      const lines = out.split('\n').map((l) => l.trim());
      // The first failed assertion, else the first error a test file died of.
      const failed =
        lines.find((l) => /^not ok \d+ - /.test(l) && !/\.test\.ts/.test(l))?.replace(/^not ok \d+ - /, '') ??
        lines.find((l) => /^\w*Error\b/.test(l));
      resolve(
        code === 0
          ? { result: 'pass', seconds }
          : { result: 'fail', firstFailure: (failed ?? `tap exited ${code}`).slice(0, 200), seconds },
      );
    });
  });
}

function cell(o: Outcome): string {
  switch (o.result) {
    case 'pass':
      return 'pass';
    case 'fail':
      return `**fail**: ${o.firstFailure.replace(/\|/g, '\\|')}`;
    default:
      return `not supported: ${o.reason}`;
  }
}

function writeResults(rows: Row[], karpenterRows: Row[], awsRows: Row[]): void {
  mkdirSync(outDir, { recursive: true });
  writeFileSync(
    join(outDir, 'results.json'),
    `${JSON.stringify({ generatedAt: new Date().toISOString(), certManager: CERT_MANAGER.version, rows, karpenterRows, awsRows }, null, 2)}\n`,
  );
  const awsColumns = [
    ...awsRows.map((r) => ({
      version: r.version,
      cell: cell(r.suites[AWS_SUITE.name] ?? { result: 'not supported', reason: 'not run' }),
      build: String(r.buildSeconds),
      run: String(r.runSeconds),
    })),
    ...Object.entries(AWS_KARPENTER_UNBUILDABLE).map(([version, reason]) => ({
      version,
      cell: `not supported: ${reason}`,
      build: '-',
      run: '-',
    })),
  ];
  const lines = [
    '# Compatibility matrix: kube-apiserver versions x suites',
    '',
    `Written by \`npm run test:matrix\` on ${new Date().toISOString().slice(0, 10)} (${rows.length} versions; the default, ${DEFAULT_VERSION}, also runs in every \`npm test\`).`,
    'Each version is built from the Go module proxy (`k8s.io/kubernetes` with its staging modules at the same minor) and runs the suites below against a real etcd and kube-apiserver of that version.',
    '',
    `| suite | ${rows.map((r) => r.version).join(' | ')} |`,
    `|---|${rows.map(() => '---').join('|')}|`,
    ...SUITES.map(
      (s) =>
        `| ${s.name} | ${rows.map((r) => cell(r.suites[s.name] ?? { result: 'not supported', reason: 'not run' })).join(' | ')} |`,
    ),
    `| build in this run (s; 0: cached) | ${rows.map((r) => String(r.buildSeconds)).join(' | ')} |`,
    `| run (s) | ${rows.map((r) => String(r.runSeconds)).join(' | ')} |`,
    '',
    `Real Karpenter (its KWOK provider, built from the Go module proxy) on kube-apiserver ${DEFAULT_VERSION}:`,
    '',
    `| suite | ${karpenterRows.map((r) => `Karpenter ${r.version}`).join(' | ')} |`,
    `|---|${karpenterRows.map(() => '---').join('|')}|`,
    `| ${KARPENTER_SUITE.name} | ${karpenterRows.map((r) => cell(r.suites[KARPENTER_SUITE.name] ?? { result: 'not supported', reason: 'not run' })).join(' | ')} |`,
    `| build in this run (s; 0: cached) | ${karpenterRows.map((r) => String(r.buildSeconds)).join(' | ')} |`,
    `| run (s) | ${karpenterRows.map((r) => String(r.runSeconds)).join(' | ')} |`,
    '',
    `Real Karpenter with its AWS provider (built from the Go module proxy) against a local EC2 (moto, with EC2's documented allocation rules as a plug-in), in a network namespace with only loopback, on kube-apiserver ${DEFAULT_VERSION}:`,
    '',
    `| suite | ${awsColumns.map((c) => `AWS provider ${c.version}`).join(' | ')} |`,
    `|---|${awsColumns.map(() => '---').join('|')}|`,
    `| ${AWS_SUITE.name} | ${awsColumns.map((c) => c.cell).join(' | ')} |`,
    `| build in this run (s; 0: cached) | ${awsColumns.map((c) => c.build).join(' | ')} |`,
    `| run (s) | ${awsColumns.map((c) => c.run).join(' | ')} |`,
    '',
    'What each suite covers:',
    '',
    ...[...SUITES, KARPENTER_SUITE, AWS_SUITE].map(
      (s) => `- **${s.name}** (${s.files.map((f) => `\`${f}\``).join(', ')}): ${s.covers}.`,
    ),
    '',
  ];
  writeFileSync(join(outDir, 'results.md'), lines.join('\n'));
}

const args = process.argv.slice(2);
const wanted = args.filter((a) => a.startsWith('v'));
const karpenterOnly = args.includes('--karpenter-only');
const versions = karpenterOnly ? [] : wanted.length > 0 ? wanted : KUBERNETES_VERSIONS;
const previous = (() => {
  try {
    return JSON.parse(readFileSync(join(outDir, 'results.json'), 'utf8')) as {
      rows: Row[];
      karpenterRows?: Row[];
      awsRows?: Row[];
    };
  } catch {
    return { rows: [] as Row[], karpenterRows: [] as Row[], awsRows: [] as Row[] };
  }
})();
const rows = new Map(previous.rows.map((r) => [r.version, r]));
const karpenterRows = new Map((previous.karpenterRows ?? []).map((r) => [r.version, r]));
const awsRows = new Map((previous.awsRows ?? []).map((r) => [r.version, r]));
// Kept in the order of the version lists, written after each version so a long run leaves its results.
const write = () =>
  writeResults(
    KUBERNETES_VERSIONS.flatMap((v) => rows.get(v) ?? []),
    KARPENTER_VERSIONS.flatMap((v) => karpenterRows.get(v) ?? []),
    AWS_KARPENTER_VERSIONS.flatMap((v) => awsRows.get(v) ?? []),
  );
for (const version of versions) {
  console.log(`[matrix] ${version}: building`);
  const buildSeconds = build(version);
  const started = Date.now();
  const suites: Row['suites'] = {};
  for (const suite of SUITES) {
    if (suite.certManager && (minor(version) < CERT_MANAGER.minMinor || minor(version) > CERT_MANAGER.maxMinor)) {
      suites[suite.name] = {
        result: 'not supported',
        reason: `cert-manager ${CERT_MANAGER.version} supports Kubernetes 1.${CERT_MANAGER.minMinor}-1.${CERT_MANAGER.maxMinor}`,
      };
      continue;
    }
    console.log(`[matrix] ${version}: ${suite.name}`);
    suites[suite.name] = await run(suite, version);
    console.log(`[matrix] ${version}: ${suite.name}: ${cell(suites[suite.name]!)}`);
  }
  rows.set(version, { version, buildSeconds, runSeconds: Math.round((Date.now() - started) / 1000), suites });
  write();
}
if (wanted.length === 0 || karpenterOnly) {
  for (const version of KARPENTER_VERSIONS) {
    console.log(`[matrix] Karpenter ${version}: building`);
    const env = { VENEER_KARPENTER_KWOK_VERSION: version };
    const started = Date.now();
    execFileSync('bash', [join(root, 'scripts', 'control-plane.sh'), 'karpenter-kwok', 'kube-scheduler'], {
      stdio: 'inherit',
      env: { ...process.env, ...env },
    });
    const buildSeconds = Math.round((Date.now() - started) / 1000);
    const outcome = await run(KARPENTER_SUITE, DEFAULT_VERSION, env);
    console.log(`[matrix] Karpenter ${version}: ${cell(outcome)}`);
    karpenterRows.set(version, {
      version,
      buildSeconds,
      runSeconds: outcome.seconds,
      suites: { [KARPENTER_SUITE.name]: outcome },
    });
    write();
  }
}
if (wanted.length === 0 || karpenterOnly) {
  for (const version of AWS_KARPENTER_VERSIONS) {
    console.log(`[matrix] Karpenter AWS provider ${version}: building`);
    const started = Date.now();
    execFileSync(
      'bash',
      [
        join(root, 'scripts', 'control-plane.sh'),
        'karpenter-aws',
        'karpenter-oracle-v1.14.3',
        'kube-scheduler',
        'moto',
      ],
      { stdio: 'inherit' },
    );
    const buildSeconds = Math.round((Date.now() - started) / 1000);
    const outcome = await run(AWS_SUITE, DEFAULT_VERSION);
    console.log(`[matrix] Karpenter AWS provider ${version}: ${cell(outcome)}`);
    awsRows.set(version, { version, buildSeconds, runSeconds: outcome.seconds, suites: { [AWS_SUITE.name]: outcome } });
    write();
  }
}
const failed = [...rows.values(), ...karpenterRows.values(), ...awsRows.values()].some((r) =>
  Object.values(r.suites).some((o) => o.result === 'fail'),
);
console.log(`[matrix] wrote test/matrix/results.md${failed ? ' (with failures)' : ''}`);
process.exitCode = failed ? 1 : 0;
