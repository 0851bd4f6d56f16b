// The release workflow (.github/workflows/release.yml), checked here since it cannot run here:
// actionlint finds nothing in it (and does find a mistake planted in a copy); every action pinned
// by commit, the commits those of docs/releasing.md; the image built for both platforms with the
// build stage on the runner's own, pushed by digest, tagged only after the chart's `helm test`
// passed on that digest, then signed and attested, and it is the image the chart installs by
// default; the chart pushed after it, signed and attested; the version gate refuses a tag that
// differs from package.json or the chart; the chart's `helm test` hook is least privilege.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { binary } from '../../kit/control-plane.ts';
import { plan } from '../../kit/dockerfile.ts';
import type * as k8s from '@kubernetes/client-node';
import { CHART, find, helm, type Obj, template } from '../support/chart.ts';

const root = join(import.meta.dirname, '..', '..');
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
  env?: Record<string, string>;
  outputs?: Record<string, string>;
  steps: Step[];
}
interface Workflow {
  on: { push: { tags: string[] } };
  permissions: Record<string, string> | string;
  concurrency: { group: string; 'cancel-in-progress': boolean };
  env: {
    IMAGE: string;
    CHART_REGISTRY: string;
    CHART_DIR: string;
    HELM_VERSION: string;
    CERT_MANAGER_VERSION: string;
    KIND_VERSION: string;
    KIND_NODE_IMAGE: string;
  };
  jobs: {
    version: Job & { outputs: Record<string, string> };
    image: Job;
    'chart-test': Job;
    'publish-image': Job;
    chart: Job;
    public: Job;
  };
}
const workflow = parse(text) as Workflow;
const pkgVersion = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
const chartYaml = parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as {
  name: string;
  version: string;
  appVersion: string;
  annotations: Record<string, string>;
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
const runs = (job: Job) => job.steps.map((s) => s.run ?? '').join('\n');
/** Where in the job's steps a step using `action`, or running `command`, is; -1 if none. */
const at = (job: Job, what: string) =>
  job.steps.findIndex((s) => s.uses?.split('@')[0] === what || (s.run ?? '').includes(what));

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
    // Pinned by commit, the actions' inputs are unknown to actionlint; the steps' ids are not.
    ['a step that does not exist', 'steps.build.outputs.digest', 'steps.biuld.outputs.digest', 'expression'],
    [
      'a variable left unquoted, for shellcheck',
      'docker tag "$IMAGE@$DIGEST"',
      'docker tag $IMAGE@$DIGEST',
      'shellcheck',
    ],
    ['a permission scope that does not exist', 'packages: write', 'package: write', 'permissions'],
    ['a job that does not exist', 'needs: [version, image]', 'needs: [version, imgae]', 'job-needs'],
    [
      'an output the image job does not have',
      'needs.image.outputs.digest }}',
      'needs.image.outputs.digets }}',
      'expression',
    ],
    ['a permission level that does not exist', 'id-token: write', 'id-token: writ', 'permissions'],
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

t.test('on a v* tag, least privilege, one release of a tag at a time', async (t) => {
  t.same(workflow.on, { push: { tags: ['v*'] } });
  t.same(workflow.permissions, { contents: 'read' });
  const allowed = new Set(['contents:read', 'packages:read', 'packages:write', 'id-token:write', 'attestations:write']);
  for (const [name, job] of Object.entries(workflow.jobs)) {
    t.type(job.permissions, 'object', `${name} says its permissions`);
    for (const [scope, level] of Object.entries(job.permissions as Record<string, string>))
      t.ok(allowed.has(`${scope}:${level}`), `${name}: ${scope}: ${level}`);
  }
  const signing = Object.entries(workflow.jobs)
    .filter(([, job]) => (job.permissions as Record<string, string>)['id-token'] === 'write')
    .map(([name]) => name);
  t.same(signing, ['publish-image', 'chart'], 'an OIDC token only where something is signed');
  t.same(workflow.jobs.version.permissions, { contents: 'read' }, 'the gate cannot write packages');
  t.same(
    workflow.jobs['chart-test'].permissions,
    { contents: 'read', packages: 'read' },
    'the test reads the image only',
  );
  t.match(workflow.concurrency.group, /github\.ref/);
  t.equal(workflow.concurrency['cancel-in-progress'], false, 'a release half pushed is never cancelled');
});

/** docs/releasing.md's table of pins: action, version, commit. */
function documentedPins(): Map<string, { version: string; sha: string }> {
  const doc = readFileSync(join(root, 'docs', 'releasing.md'), 'utf8');
  const pins = new Map<string, { version: string; sha: string }>();
  for (const m of doc.matchAll(/^\| `([\w.-]+\/[\w.-]+)` \| (v\d+\.\d+\.\d+) \| `([0-9a-f]{40})` \|/gm))
    pins.set(m[1]!, { version: m[2]!, sha: m[3]! });
  return pins;
}

t.test("every action pinned by a commit, its version in a comment, as docs/releasing.md's table has it", async (t) => {
  const lines = text.split('\n').filter((l) => /^\s*(-\s+)?uses:/.test(l));
  t.ok(lines.length >= 10, `${lines.length} uses`);
  const pins = documentedPins();
  const used = new Set<string>();
  for (const line of lines) {
    const m = /^\s*(?:-\s+)?uses: ([\w.-]+\/[\w.-]+)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)$/.exec(line);
    t.ok(m, `pinned by commit with its version: ${line.trim()}`);
    if (!m) continue;
    const [, action, sha, version] = m;
    used.add(action!);
    t.same({ version, sha }, pins.get(action!), `${action}: the commit the docs say was confirmed`);
  }
  t.same([...pins.keys()].sort(), [...used].sort(), 'the table lists the actions used, no more');
  t.notOk(used.has('docker/setup-qemu-action'), 'no emulation: the Dockerfile runs nothing for the target');
});

t.test(
  'the image: both platforms, the build stage on the runner, SBOM and provenance, pushed by digest only',
  async (t) => {
    const image = workflow.jobs.image;
    t.same(needs(image), ['version'], 'built only once the tag passed the version gate');
    for (const action of ['docker/setup-buildx-action', 'docker/login-action'])
      t.ok(at(image, action) >= 0 && at(image, action) < at(image, 'docker/build-push-action'), action);
    const build = stepUsing(image, 'docker/build-push-action')!;
    const w = build.with ?? {};
    t.same(
      String(w.platforms)
        .split(',')
        .map((p) => p.trim())
        .sort(),
      ['linux/amd64', 'linux/arm64'],
    );
    t.equal(w.context, '.');
    t.ok(existsSync(join(root, String(w.file))), `${w.file} is the repository's`);
    t.equal(w.tags, expr('env.IMAGE'), 'the name only: no tag');
    t.equal(w.outputs, 'type=image,push-by-digest=true,name-canonical=true,push=true');
    t.equal(w.push, undefined, "the push is the output's");
    t.equal(w.sbom, true);
    t.equal(w.provenance, 'mode=max');
    t.equal(image.outputs?.digest, expr(`steps.${build.id}.outputs.digest`));
    t.equal(stepUsing(image, 'docker/login-action')?.with?.registry, 'ghcr.io');

    const [buildStage, runtime] = plan({ target: 'linux/arm64', dockerfile: join(root, String(w.file)) });
    t.match(
      readFileSync(join(root, String(w.file)), 'utf8'),
      /^FROM --platform=\$BUILDPLATFORM \S+ AS build$/m,
      "the build stage on the builder's platform",
    );
    t.notSame(buildStage?.platform, runtime?.platform, 'built for arm64 here, the build stage is not arm64');
    t.same(
      runtime?.instructions.filter((i) => i.instruction === 'RUN'),
      [],
      'the runtime stage runs nothing on the target',
    );
  },
);

t.test(
  'chart-test: the pushed digest in kind, with cert-manager and the Karpenter CRDs; lint, install, helm test',
  async (t) => {
    const test = workflow.jobs['chart-test'];
    t.same(needs(test).sort(), ['image', 'version']);
    t.equal(test.env?.DIGEST, expr('needs.image.outputs.digest'));
    const order = [
      'helm lint --strict "$CHART_DIR"',
      'helm/kind-action',
      'docker pull --platform linux/amd64 "$IMAGE@$DIGEST"',
      'docker image save --platform linux/amd64 "$IMAGE:release-test"',
      'kind load image-archive "$RUNNER_TEMP/image.tar"',
      'helm install cert-manager oci://quay.io/jetstack/charts/cert-manager --version "$CERT_MANAGER_VERSION"',
      'kubectl apply --server-side -f kit/crds/',
      'helm install veneer-node-watcher "$CHART_DIR"',
      'helm test veneer-node-watcher -n veneer-system',
    ].map((what) => [what, at(test, what)] as const);
    for (const [what, i] of order) t.ok(i >= 0, what);
    t.same(
      order.map(([, i]) => i),
      order.map(([, i]) => i).sort((a, b) => a - b),
      'in this order',
    );
    t.match(runs(test), '--set nodeWatcher.enabled=true --set image.tag=release-test --set image.pullPolicy=Never');
    t.ok(existsSync(join(root, 'kit', 'crds', 'karpenter.sh_nodeoverlays.yaml')), 'the CRDs it applies are here');
    t.equal(stepUsing(test, 'azure/setup-helm')?.with?.version, expr('env.HELM_VERSION'));
    t.equal(
      workflow.env.CERT_MANAGER_VERSION,
      `v${chartYaml.annotations['veneer.io/tested-cert-manager-version']?.split(' ')[0]}`,
      "the cert-manager the chart's tests run",
    );
    const installing = readFileSync(join(root, 'docs', 'installing.md'), 'utf8');
    t.match(
      installing,
      `cert-manager --version ${workflow.env.CERT_MANAGER_VERSION}`,
      'the version users are told to install',
    );

    // The lint the job runs passes on this tree.
    for (const extra of [[], ['--set', 'nodeWatcher.enabled=true']]) {
      const lint = helm(['lint', '--strict', CHART, ...extra]);
      t.equal(lint.status, 0, lint.stdout + lint.stderr);
    }
  },
);

t.test('publish-image: the tested digest tagged, then signed keyless, its SBOMs and provenance attested', async (t) => {
  const job = workflow.jobs['publish-image'];
  t.same(needs(job).sort(), ['chart-test', 'image', 'version'], "no tag before the chart's test passed");
  t.same(job.permissions, { contents: 'read', packages: 'write', 'id-token': 'write', attestations: 'write' });
  t.equal(job.env?.DIGEST, expr('needs.image.outputs.digest'));
  t.equal(job.env?.VERSION, expr('needs.version.outputs.version'));
  const script = runs(job);
  t.match(script, 'docker buildx imagetools create --tag "$IMAGE:$VERSION" "$IMAGE@$DIGEST"');
  t.match(script, 'is $tagged, not the tested $DIGEST', 'the tag checked to be the tested digest');
  t.match(script, 'cosign sign --yes --recursive "$IMAGE@$DIGEST"');
  t.match(script, 'for platform in linux/amd64 linux/arm64; do');
  t.match(script, 'cosign attest --yes --type spdxjson --predicate "$sbom" "$IMAGE@$DIGEST"');
  t.ok(at(job, 'sigstore/cosign-installer') < at(job, 'cosign sign'), 'cosign installed first');
  t.ok(at(job, 'docker buildx imagetools create') < at(job, 'cosign sign'), 'signed once tagged');
  t.same(stepUsing(job, 'actions/attest-build-provenance')?.with, {
    'subject-name': expr('env.IMAGE'),
    'subject-digest': expr('env.DIGEST'),
    'push-to-registry': true,
  });
  t.match(script, 'GITHUB_STEP_SUMMARY');
  t.match(script, '--set image.digest=$DIGEST', 'the summary says how to pin it');

  // What it publishes for this tree's version, and what the chart's Deployment runs by default
  // (values.yaml leaves image.tag empty: the template then uses the chart's appVersion), or
  // pinned by the digest the summary gives.
  const published = `${workflow.env.IMAGE}:${pkgVersion}`;
  t.equal(published, `ghcr.io/veneer/veneer-node-watcher:${pkgVersion}`);
  const images = (extra: string[] = []) =>
    (
      find(template(extra), 'Deployment') as unknown as {
        spec: { template: { spec: { containers: { image: string }[] } } };
      }
    ).spec.template.spec.containers.map((c) => c.image);
  t.same(images(), [published]);
  const digest = `sha256:${'0'.repeat(64)}`;
  t.same(images(['--set', `image.digest=${digest}`]), [`${workflow.env.IMAGE}@${digest}`]);
});

t.test('the chart: pushed to oci://ghcr.io/veneer/charts only after the image, signed and attested', async (t) => {
  const chart = workflow.jobs.chart;
  t.ok(needs(chart).includes('publish-image'), 'the chart never names an image not yet tagged');
  t.ok(needs(chart).includes('version'));
  t.equal(workflow.env.CHART_REGISTRY, 'oci://ghcr.io/veneer/charts');
  t.equal(workflow.env.CHART_DIR, 'charts/veneer-node-watcher');
  const script = runs(chart);
  t.match(script, 'helm package "$CHART_DIR" --destination "$RUNNER_TEMP/chart"');
  t.match(script, 'helm push "$RUNNER_TEMP/chart/veneer-node-watcher-$VERSION.tgz" "$CHART_REGISTRY"');
  t.match(script, 'helm registry login ghcr.io');
  // biome-ignore lint/suspicious/noTemplateCurlyInString: bash's own syntax
  t.match(script, 'cosign sign --yes "${CHART_REGISTRY#oci://}/veneer-node-watcher@$DIGEST"');
  const push = chart.steps.find((s) => s.id === 'push')!;
  t.ok(at(chart, 'helm push') < at(chart, 'cosign sign'));
  t.same(stepUsing(chart, 'actions/attest-build-provenance')?.with, {
    'subject-name': 'ghcr.io/veneer/charts/veneer-node-watcher',
    'subject-digest': expr(`steps.${push.id}.outputs.digest`),
    'push-to-registry': true,
  });
  t.equal(stepUsing(chart, 'azure/setup-helm')?.with?.version, expr('env.HELM_VERSION'));
  t.match(readFileSync(join(root, 'scripts', 'builds', '30-helm.sh'), 'utf8'), `:-${workflow.env.HELM_VERSION}}`);

  // The push step's digest is read from helm's own words.
  const dir = mkdtempSync(join(tmpdir(), 'vnw-chart-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const digest = `sha256:${'ab'.repeat(32)}`;
  writeFileSync(
    join(dir, 'push.log'),
    `Pushed: ghcr.io/veneer/charts/veneer-node-watcher:${pkgVersion}\nDigest: ${digest}\n`,
  );
  const read = /digest="\$\((sed .*)\)"$/m.exec(push.run ?? '')?.[1];
  t.ok(read, 'the step reads the digest with sed');
  const sed = spawnSync('bash', ['-c', read!.replace('"$RUNNER_TEMP/push.log"', `'${join(dir, 'push.log')}'`)], {
    encoding: 'utf8',
  });
  t.equal(sed.stdout.trim(), digest);

  // The package the push step names is the one `helm package` makes, of the tag's version.
  const r = helm(['package', CHART, '--destination', dir]);
  t.equal(r.status, 0, r.stderr);
  t.same(
    readdirSync(dir).filter((f) => f.endsWith('.tgz')),
    [`veneer-node-watcher-${pkgVersion}.tgz`],
  );
  const shown = helm(['show', 'chart', join(dir, `veneer-node-watcher-${pkgVersion}.tgz`)]);
  t.match(parse(shown.stdout), { name: 'veneer-node-watcher', version: pkgVersion, appVersion: pkgVersion });
});

t.test(
  "the chart's helm test: only with the watcher enabled, least privilege, none of the watcher's selectors",
  async (t) => {
    const hooks = (objs: Obj[]) => objs.filter((o) => o.metadata.annotations?.['helm.sh/hook'] === 'test');
    t.same(hooks(template()), [], 'disabled: no webhook to test');
    t.same(
      hooks(template(['--set', 'nodeWatcher.enabled=true', '--set', 'nodeWatcher.mode=observe'])),
      [],
      'observe: no webhook to test either',
    );
    const objs = template(['--set', 'nodeWatcher.enabled=true']);
    const tests = hooks(objs);
    t.same(tests.map((o) => o.kind).sort(), ['ClusterRole', 'ClusterRoleBinding', 'Pod', 'ServiceAccount']);
    const role = find(tests, 'ClusterRole') as unknown as { rules: unknown[] };
    t.same(role.rules, [{ apiGroups: [''], resources: ['nodes'], verbs: ['create'] }], 'create nodes, nothing else');
    for (const o of tests.filter((o) => o.kind !== 'Pod'))
      t.match(
        o.metadata.annotations?.['helm.sh/hook-delete-policy'],
        /hook-succeeded,hook-failed/,
        `${o.kind} removed after the test`,
      );
    const pod = find(tests, 'Pod') as unknown as k8s.V1Pod;
    const deployment = find(objs, 'Deployment') as unknown as k8s.V1Deployment;
    const watcher = deployment.spec!.template.spec!;
    const container = pod.spec!.containers[0]!;
    t.equal(container.image, watcher.containers[0]!.image, "the watcher's image");
    t.equal(container.command?.[0], '/nodejs/bin/node', "the image's own Node (no shell in it)");
    t.match(container.command?.[2], "path: '/api/v1/nodes?dryRun=All'", 'a dry run: nothing is stored');
    t.same(container.securityContext, watcher.containers[0]!.securityContext, "the watcher's confinement");
    t.match(pod.spec!.securityContext, {
      runAsNonRoot: true,
      runAsUser: 65532,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    t.equal(pod.spec!.restartPolicy, 'Never');
    t.not(pod.spec!.serviceAccountName, watcher.serviceAccountName, "not the watcher's account");
    const selector = (find(objs, 'Service') as unknown as k8s.V1Service).spec!.selector!;
    t.notOk(
      Object.entries(selector).every(([k, v]) => pod.metadata!.labels![k] === v),
      'the Service does not select it',
    );
    // The node the check creates is one the webhooks' matchConditions let through.
    const script = container.command?.[2] ?? '';
    for (const label of [
      "'karpenter.sh/nodepool'",
      "'karpenter.sh/capacity-type': 'on-demand'",
      "'karpenter.sh/registered': 'true'",
    ])
      t.match(script, label);
    t.equal(
      container.env?.find((e) => e.name === 'INFLUENCED')?.value,
      'veneer.io/overlay-influenced',
      'the record key of the labelNamespace',
    );
    const webhooks = find(objs, 'MutatingWebhookConfiguration') as unknown as k8s.V1MutatingWebhookConfiguration;
    t.same(
      webhooks.webhooks?.map((w) => w.sideEffects),
      ['None'],
      'called for a dry run only because it has no side effects',
    );
  },
);

t.test(
  'the chart published names the tested digest; the kind node and the base images are pinned by digest',
  async (t) => {
    const chart = workflow.jobs.chart;
    t.equal(chart.env?.IMAGE_DIGEST, expr('needs.image.outputs.digest'));
    t.ok(at(chart, 'sed -i -E') < at(chart, 'helm package'), 'the digest is written before the chart is packaged');
    // The job's own sed on a copy of this chart: image.digest becomes the digest, and helm shows it.
    const dir = mkdtempSync(join(tmpdir(), 'vnw-digest-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    cpSync(CHART, join(dir, 'chart'), { recursive: true });
    const step = chart.steps.find((s) => s.name === 'The tested digest into the chart')!;
    const digest = `sha256:${'cd'.repeat(32)}`;
    const r = spawnSync('bash', ['-c', step.run!], {
      encoding: 'utf8',
      env: {
        ...process.env,
        CHART_DIR: join(dir, 'chart'),
        IMAGE_DIGEST: digest,
        PATH: `${dirname(binary('helm'))}:${process.env.PATH}`,
      },
    });
    t.equal(r.status, 0, r.stdout + r.stderr);
    const rendered = template(['--set', 'nodeWatcher.enabled=true'], 'x', join(dir, 'chart'));
    t.equal(
      (find(rendered, 'Deployment') as unknown as k8s.V1Deployment).spec?.template.spec?.containers[0]?.image,
      `ghcr.io/veneer/veneer-node-watcher@${digest}`,
      'the published chart runs exactly the image tested',
    );

    const kind = stepUsing(workflow.jobs['chart-test'], 'helm/kind-action')?.with;
    t.equal(kind?.node_image, expr('env.KIND_NODE_IMAGE'));
    t.equal(kind?.version, expr('env.KIND_VERSION'));
    t.match(
      workflow.env.KIND_NODE_IMAGE,
      /^kindest\/node:v\d+\.\d+\.\d+@sha256:[0-9a-f]{64}$/,
      'the kind node by digest',
    );
    const froms = readFileSync(join(root, 'Dockerfile'), 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('FROM '));
    t.equal(froms.length, 2);
    for (const from of froms)
      t.match(from, /\S+@sha256:[0-9a-f]{64}( AS \w+)?$/, `${from.split(' ').at(-3) ?? from}: by digest`);
    const dependabot = parse(readFileSync(join(root, '.github', 'dependabot.yml'), 'utf8')) as {
      updates: { 'package-ecosystem': string }[];
    };
    t.same(
      dependabot.updates.map((u) => u['package-ecosystem']).sort(),
      ['docker', 'github-actions', 'npm'],
      'Dependabot proposes each new digest, commit and lock file as a change',
    );
  },
);

t.test('public: the chart and the image pulled with no credentials, after the chart is pushed', async (t) => {
  const job = workflow.jobs.public;
  t.same(needs(job).sort(), ['chart', 'image', 'version']);
  t.same(job.permissions, {}, 'no token at all');
  const script = runs(job);
  t.match(script, 'HELM_REGISTRY_CONFIG="$RUNNER_TEMP/no-credentials.json"');
  t.match(script, 'DOCKER_CONFIG="$RUNNER_TEMP/no-docker-config"');
  t.match(script, 'helm show chart "$CHART_REGISTRY/veneer-node-watcher" --version "$VERSION"');
  t.match(script, 'docker buildx imagetools inspect "$IMAGE@$DIGEST"');
  t.notMatch(script, /login/, 'never logs in');
  t.match(
    readFileSync(join(root, 'docs', 'releasing.md'), 'utf8'),
    /## The first release/,
    'the one-time step it points to',
  );
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
