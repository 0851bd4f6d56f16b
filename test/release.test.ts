// The release workflow (.github/workflows/release.yml), checked here since it cannot run here:
// actionlint finds nothing in it (and does find a mistake planted in a copy), it publishes the
// image the chart installs by default, for both platforms, and its version gate refuses a tag
// that differs from package.json or the chart.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { binary } from '../kit/control-plane.ts';
import { CHART, find, helm, template } from './support/chart.ts';

const root = join(import.meta.dirname, '..');
const WORKFLOW = join(root, '.github', 'workflows', 'release.yml');
const text = readFileSync(WORKFLOW, 'utf8');

interface Step {
  id?: string;
  name?: string;
  uses?: string;
  run?: string;
  with?: Record<string, string | boolean>;
  env?: Record<string, string>;
}
interface Job {
  needs?: string | string[];
  permissions?: Record<string, string> | string;
  steps: Step[];
}
interface Workflow {
  on: { push: { tags: string[] } };
  permissions: Record<string, string> | string;
  concurrency: { group: string; 'cancel-in-progress': boolean };
  env: { IMAGE: string; CHART_REGISTRY: string; CHART_DIR: string; HELM_VERSION: string };
  jobs: { version: Job & { outputs: Record<string, string> }; image: Job; chart: Job };
}
const workflow = parse(text) as Workflow;
const pkgVersion = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
const chartYaml = parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as {
  name: string;
  version: string;
  appVersion: string;
};

interface Finding {
  message: string;
  kind: string;
  line: number;
}
/** actionlint's findings in the named workflow files, as JSON. */
function actionlint(files: string[]): { status: number | null; findings: Finding[]; stderr: string } {
  const r = spawnSync(binary('actionlint'), ['-format', '{{json .}}', ...files], { cwd: root, encoding: 'utf8' });
  return { status: r.status, findings: r.stdout.trim() ? (JSON.parse(r.stdout) as Finding[]) : [], stderr: r.stderr };
}

/** A GitHub Actions expression, as the workflow writes it. */
const expr = (e: string) => `\${{ ${e} }}`;
const needs = (job: Job) => (job.needs === undefined ? [] : ([] as string[]).concat(job.needs));
const stepUsing = (job: Job, action: string) => job.steps.find((s) => s.uses?.split('@')[0] === action);

t.test('actionlint finds nothing in .github/workflows', async (t) => {
  // Every workflow by name, so that no Git checkout is needed for actionlint to find them.
  const workflows = readdirSync(join(root, '.github', 'workflows')).filter((f) => /\.ya?ml$/.test(f));
  t.ok(workflows.includes('release.yml'));
  const r = actionlint(workflows.map((f) => join('.github', 'workflows', f)));
  t.same(r.findings, [], r.stderr);
  t.equal(r.status, 0, r.stderr);
});

t.test('actionlint reports each mistake planted in a copy of the workflow', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'vnw-release-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const mistakes: [string, string, string, string][] = [
    // [what, replaced, by, the kind of finding actionlint must report]
    [
      'an output the version job does not have',
      'needs.version.outputs.version }}\n',
      'needs.version.outputs.verison }}\n',
      'expression',
    ],
    ['an input build-push-action does not have', 'platforms: linux/amd64', 'platform: linux/amd64', 'action'],
    ['a permission scope that does not exist', 'packages: write', 'package: write', 'permissions'],
    ['a job that does not exist', 'needs: [version, image]', 'needs: [version, imgae]', 'job-needs'],
  ];
  for (const [what, from, to, kind] of mistakes) {
    t.ok(text.includes(from), `the workflow has ${JSON.stringify(from)}`);
    const file = join(dir, `${kind}.yml`);
    writeFileSync(file, text.replace(from, to));
    const r = actionlint([file]);
    t.not(r.status, 0, what);
    t.ok(
      r.findings.some((f) => f.kind === kind),
      `${what}: found by the ${kind} rule (${r.findings.map((f) => `${f.kind}: ${f.message.slice(0, 100)}`).join('; ')})`,
    );
  }
});

t.test(
  'on a v* tag, least privilege, one release of a tag at a time, actions pinned to a major or a commit',
  async (t) => {
    t.same(workflow.on, { push: { tags: ['v*'] } });
    t.same(workflow.permissions, { contents: 'read' });
    const allowed = new Set(['contents:read', 'packages:write']);
    for (const [name, job] of Object.entries(workflow.jobs)) {
      t.type(job.permissions, 'object', `${name} says its permissions`);
      for (const [scope, level] of Object.entries(job.permissions as Record<string, string>))
        t.ok(allowed.has(`${scope}:${level}`), `${name}: ${scope}: ${level}`);
      for (const step of job.steps.filter((s) => s.uses))
        t.match(step.uses, /^[\w.-]+\/[\w.-]+@(v\d+|[0-9a-f]{40})$/, `${name}: ${step.uses}`);
    }
    t.same(workflow.jobs.version.permissions, { contents: 'read' }, 'the gate cannot write packages');
    t.match(workflow.concurrency.group, /github\.ref/);
    t.equal(workflow.concurrency['cancel-in-progress'], false, 'a release half pushed is never cancelled');
  },
);

t.test(
  'the image: the Dockerfile for linux/amd64 and linux/arm64, pushed as the image the chart installs by default',
  async (t) => {
    const image = workflow.jobs.image;
    t.same(needs(image), ['version'], 'built only once the tag passed the version gate');
    const uses = image.steps.map((s) => s.uses?.split('@')[0]);
    for (const action of ['docker/setup-qemu-action', 'docker/setup-buildx-action', 'docker/login-action'])
      t.ok(uses.indexOf(action) >= 0 && uses.indexOf(action) < uses.indexOf('docker/build-push-action'), action);
    const build = stepUsing(image, 'docker/build-push-action')?.with ?? {};
    t.same(
      String(build.platforms)
        .split(',')
        .map((p) => p.trim())
        .sort(),
      ['linux/amd64', 'linux/arm64'],
    );
    t.equal(build.push, true);
    t.equal(build.context, '.');
    t.ok(existsSync(join(root, String(build.file))), `${build.file} is the repository's`);
    t.equal(build.tags, `${expr('env.IMAGE')}:${expr('needs.version.outputs.version')}`);
    t.equal(stepUsing(image, 'docker/login-action')?.with?.registry, 'ghcr.io');

    // What it publishes for this tree's version, and what the chart's Deployment runs by default
    // (values.yaml leaves image.tag empty: the template then uses the chart's appVersion).
    const published = `${workflow.env.IMAGE}:${pkgVersion}`;
    t.equal(published, `ghcr.io/veneer/veneer-node-watcher:${pkgVersion}`);
    const deployment = find(template(), 'Deployment') as unknown as {
      spec: { template: { spec: { containers: { name: string; image: string }[] } } };
    };
    t.same(
      deployment.spec.template.spec.containers.map((c) => c.image),
      [published],
    );
  },
);

t.test('the chart: packaged and pushed to oci://ghcr.io/veneer/charts only after the image', async (t) => {
  const chart = workflow.jobs.chart;
  t.ok(needs(chart).includes('image'), 'the chart never names an image not yet pushed');
  t.ok(needs(chart).includes('version'));
  t.equal(workflow.env.CHART_REGISTRY, 'oci://ghcr.io/veneer/charts');
  t.equal(workflow.env.CHART_DIR, 'charts/veneer-node-watcher');
  const runs = chart.steps.map((s) => s.run ?? '').join('\n');
  t.match(runs, 'helm package "$CHART_DIR" --destination "$RUNNER_TEMP/chart"');
  t.match(runs, 'helm push "$RUNNER_TEMP/chart/veneer-node-watcher-$VERSION.tgz" "$CHART_REGISTRY"');
  t.match(runs, 'helm registry login ghcr.io');
  t.equal(stepUsing(chart, 'azure/setup-helm')?.with?.version, expr('env.HELM_VERSION'));
  t.match(readFileSync(join(root, 'scripts', 'builds', '30-helm.sh'), 'utf8'), `:-${workflow.env.HELM_VERSION}}`);

  // The package the push step names is the one `helm package` makes, of the tag's version.
  const dir = mkdtempSync(join(tmpdir(), 'vnw-chart-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const r = helm(['package', CHART, '--destination', dir]);
  t.equal(r.status, 0, r.stderr);
  t.same(readdirSync(dir), [`veneer-node-watcher-${pkgVersion}.tgz`]);
  const shown = helm(['show', 'chart', join(dir, `veneer-node-watcher-${pkgVersion}.tgz`)]);
  t.match(parse(shown.stdout), { name: 'veneer-node-watcher', version: pkgVersion, appVersion: pkgVersion });
});

t.test("Chart.yaml's version and appVersion are package.json's version", async (t) => {
  t.equal(chartYaml.name, 'veneer-node-watcher');
  t.equal(chartYaml.version, pkgVersion);
  t.equal(chartYaml.appVersion, pkgVersion);
});

t.test("the version gate: the workflow's own step passes the tag of this tree and fails any other", async (t) => {
  const gate = workflow.jobs.version.steps.find((s) => s.id === 'check');
  t.ok(gate?.run, 'the version job has its check step');
  t.equal(workflow.jobs.version.outputs.version, expr('steps.check.outputs.version'));
  const dir = mkdtempSync(join(tmpdir(), 'vnw-gate-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const script = join(dir, 'gate.sh');
  writeFileSync(script, gate?.run ?? '');
  const runGate = (tag: string, cwd = root) => {
    const output = join(dir, `output-${tag}-${Math.random()}`);
    writeFileSync(output, '');
    const r = spawnSync('bash', [script], {
      cwd,
      encoding: 'utf8',
      env: { ...process.env, GITHUB_REF_NAME: tag, GITHUB_OUTPUT: output, CHART_DIR: workflow.env.CHART_DIR },
    });
    return { status: r.status, stdout: r.stdout + r.stderr, output: readFileSync(output, 'utf8') };
  };

  const ok = runGate(`v${pkgVersion}`);
  t.equal(ok.status, 0, ok.stdout);
  t.equal(ok.output, `version=${pkgVersion}\n`);

  const other = runGate(`v${pkgVersion.replace(/\d+$/, (patch) => String(Number(patch) + 1))}`);
  t.equal(other.status, 1);
  t.equal(other.output, '', 'no version for the next jobs');
  for (const what of ['package.json version', 'Chart.yaml version', 'Chart.yaml appVersion'])
    t.match(other.stdout, `but ${what} is '${pkgVersion}'`);

  const notSemver = runGate('vnext');
  t.equal(notSemver.status, 1);
  t.match(notSemver.stdout, 'tag vnext is not vX.Y.Z');

  // A tree whose chart alone was not bumped: only appVersion differs.
  const tree = join(dir, 'tree');
  mkdirSync(join(tree, workflow.env.CHART_DIR), { recursive: true });
  writeFileSync(join(tree, 'package.json'), readFileSync(join(root, 'package.json')));
  writeFileSync(
    join(tree, workflow.env.CHART_DIR, 'Chart.yaml'),
    readFileSync(join(CHART, 'Chart.yaml'), 'utf8').replace(/^appVersion: .*$/m, 'appVersion: "0.0.9"'),
  );
  const stale = runGate(`v${pkgVersion}`, tree);
  t.equal(stale.status, 1);
  t.match(stale.stdout, "but Chart.yaml appVersion is '0.0.9'");
  t.notMatch(stale.stdout, 'Chart.yaml version is');
});
