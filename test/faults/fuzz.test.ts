// Generated bodies against the webhook of a real `serve` process: invalid JSON, wrong types,
// missing fields, huge strings and arrays, deep nesting, unicode keys and values, wrong
// apiVersion or kind, duplicate keys, other objects. The contract: no crash, no 5xx, a 400 or
// 413 with a message for anything that is not a review, and for every review an answer whose
// patch only writes valid labels in our namespace (replacing or removing only what a node
// carried of it at CREATE), and a live heap that does not grow.
// VENEER_FUZZ_RUNS sets the number of cases
// (`npm run test:fuzz` runs 100,000); a failure prints fast-check's seed and shrunk case.
import t from 'tap';
import { Agent, request } from 'node:https';
import fc from 'fast-check';
import { inspectorUrl, liveHeapMb } from '../../kit/inspector.ts';
import { counter, Fleet, metricsOf, spawnServe, waitReady } from '../../kit/fleet.ts';
import { startClusterEnv, WATCHER_USER } from '../../kit/watcher-env.ts';
import { isValidLabelValue } from '../../src/engine/labels.ts';

const RUNS = Number(process.env.VENEER_FUZZ_RUNS ?? 3000);
const CLIENTS = 4;

const env = await startClusterEnv();
t.teardown(() => env.cp.stop());
const { admin, cp, certs } = env;
const fleet = new Fleet(cp, admin);
await fleet.createOverlays();
// A NodeClaim the generated nodes can point at, so that many cases reach a full decision.
await fleet.sim.createNodeClaim({ name: 'fuzz-node', claimName: 'fuzz-claim', instanceType: 'm5.xlarge' });
// The inspector (loopback only) lets the test force a full GC and read the live heap.
const replica = await spawnServe(cp, certs, WATCHER_USER, { '--leader-election-enabled': 'false' }, [
  '--inspect=127.0.0.1:0',
]);
t.teardown(() => void replica.child.kill('SIGKILL'));
await waitReady(replica.healthPort);

// ---- generators -------------------------------------------------------------------------

const unicode = fc.string({ unit: 'binary', maxLength: 40 });
const hugeString = fc.integer({ min: 1_000, max: 100_000 }).map((n) => 'x'.repeat(n));
const labelKey = fc.oneof(
  fc.constantFrom(
    'karpenter.sh/nodepool',
    'karpenter.sh/capacity-type',
    'karpenter.sh/registered',
    'node.kubernetes.io/instance-type',
    'topology.kubernetes.io/region',
    'karpenter.k8s.aws/instance-family',
    'veneer.io/overlay-influenced',
    'veneer.io/matching-overlay',
    'veneer.io.evil/overlay-influenced',
    'sub.veneer.io/overlay-influenced',
    'VENEER.IO/overlay-influenced',
    'veneer.io/',
  ),
  unicode,
);
const labelValue = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom('on-demand', 'spot', 'reserved', 'default', 'true', 'm5.xlarge', 'm5', 'us-west-2', ''),
  },
  { weight: 2, arbitrary: unicode },
  { weight: 1, arbitrary: fc.string({ minLength: 63, maxLength: 64 }) },
  { weight: 1, arbitrary: hugeString },
);
const labels = fc.dictionary(labelKey, labelValue, { maxKeys: 12 });
const anything = fc.jsonValue({ maxDepth: 4 });
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined, freq: 3 });
/** `good` 19 times in 20, else one of `bad`: each field of a review is wrong now and then. */
const mostly = <T>(good: fc.Arbitrary<T>, ...bad: fc.Arbitrary<unknown>[]) =>
  fc.oneof(
    { weight: 19 * bad.length, arbitrary: good as fc.Arbitrary<unknown> },
    ...bad.map((arbitrary) => ({ weight: 1, arbitrary })),
  );

const node = fc.record(
  {
    apiVersion: maybe(fc.constantFrom('v1', 'v2', '')),
    kind: maybe(fc.constantFrom('Node', 'Pod', 'node')),
    metadata: mostly(
      fc.record(
        {
          name: maybe(fc.oneof(fc.constant('fuzz-node'), unicode, hugeString)),
          labels: maybe(mostly(labels, fc.constant(null), anything)),
          annotations: maybe(mostly(fc.dictionary(labelKey, labelValue, { maxKeys: 3 }), anything)),
          ownerReferences: maybe(
            mostly(
              fc.constant([{ apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: 'fuzz-claim', uid: 'u' }]),
              fc.array(anything, { maxLength: 3 }),
              anything,
            ),
          ),
          creationTimestamp: maybe(mostly(fc.constant(new Date().toISOString()), unicode, fc.constant(null))),
        },
        { requiredKeys: [] },
      ),
      anything,
    ),
    spec: maybe(
      mostly(
        fc.record(
          { providerID: maybe(fc.oneof(fc.constant('aws:///us-west-2a/i-0fuzz'), unicode)) },
          { requiredKeys: [] },
        ),
        anything,
      ),
    ),
  },
  { requiredKeys: [] },
);

const request_ = fc.record(
  {
    uid: mostly(
      fc.uuid(),
      fc.constant(''),
      unicode,
      fc.integer(),
      fc.constant(null),
      fc.string({ minLength: 257, maxLength: 300 }),
    ),
    kind: mostly(
      fc.constant({ group: '', version: 'v1', kind: 'Node' }),
      fc.record({
        group: fc.constantFrom('', 'apps', 'karpenter.sh'),
        version: fc.constantFrom('v1', 'v1beta1'),
        kind: fc.constantFrom('Node', 'Pod', 'NodeClaim'),
      }),
      anything,
    ),
    operation: mostly(fc.constantFrom('CREATE', 'UPDATE'), fc.constantFrom('DELETE', 'CONNECT'), unicode, anything),
    subResource: maybe(fc.constantFrom('status', '')),
    userInfo: maybe(
      mostly(
        fc.record({
          username: fc.constantFrom('system:node:fuzz', 'alice', WATCHER_USER),
          groups: fc.array(fc.constantFrom('system:nodes', 'ops'), { maxLength: 2 }),
        }),
        anything,
      ),
    ),
    object: mostly(node, fc.constant(null), anything),
    oldObject: maybe(mostly(node, fc.constant(null), anything)),
    dryRun: maybe(mostly(fc.boolean(), anything)),
  },
  { requiredKeys: ['uid', 'kind', 'operation', 'object'] },
);

const review = fc.record(
  {
    apiVersion: mostly(
      fc.constant('admission.k8s.io/v1'),
      fc.constantFrom('admission.k8s.io/v1beta1', 'v1', ''),
      anything,
    ),
    kind: mostly(fc.constant('AdmissionReview'), unicode, anything),
    request: mostly(request_, anything),
  },
  { requiredKeys: ['apiVersion', 'kind', 'request'] },
);

/** Reviews with fields left out: any subset of the envelope and of the request. */
const partialReview = fc.record(
  {
    apiVersion: fc.constant('admission.k8s.io/v1'),
    kind: fc.constant('AdmissionReview'),
    request: fc.record(
      {
        uid: fc.uuid(),
        kind: fc.constant({ group: '', version: 'v1', kind: 'Node' }),
        operation: fc.constant('CREATE'),
        object: node,
      },
      { requiredKeys: [] },
    ),
  },
  { requiredKeys: [] },
);

/** The body as bytes on the wire: mostly JSON, sometimes broken in ways JSON.stringify cannot. */
const body = fc.oneof(
  { weight: 24, arbitrary: review.map((r) => JSON.stringify(r)) },
  { weight: 1, arbitrary: partialReview.map((r) => JSON.stringify(r)) },
  {
    weight: 1,
    arbitrary: fc.tuple(review, fc.nat()).map(([r, n]) => {
      const s = JSON.stringify(r);
      return s.slice(0, n % (s.length + 1));
    }),
  },
  {
    weight: 1,
    arbitrary: review.map((r) =>
      JSON.stringify(r).replace(
        /^\{/,
        '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"dup"},',
      ),
    ),
  },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 100_000 }).map((d) => '['.repeat(d) + ']'.repeat(d)) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(review, fc.integer({ min: 100, max: 50_000 }))
      .map(([r, d]) => JSON.stringify(r).replace(/^\{/, `{"deep":${'{"a":'.repeat(d)}1${'}'.repeat(d)},`)),
  },
  {
    weight: 1,
    arbitrary: fc
      .array(fc.integer(), { minLength: 1000, maxLength: 100_000 })
      .map((a) => JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: a })),
  },
  { weight: 1, arbitrary: anything.map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 2000 }).map((b) => Buffer.from(b).toString('latin1')) },
);

const contentType = fc.oneof(
  { weight: 24, arbitrary: fc.constant('application/json') },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'application/json; charset=utf-8',
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/octet-stream',
      '',
    ),
  },
);

const fuzzCase = fc.record({ path: fc.constant('/mutate-node'), body, contentType });

// ---- the contract -----------------------------------------------------------------------

interface Reply {
  status: number;
  body: string;
}

function post(agent: Agent, c: { path: string; body: string; contentType: string }): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = c.contentType ? { 'content-type': c.contentType } : {};
    const req = request(
      { host: '127.0.0.1', port: replica.webhookPort, path: c.path, method: 'POST', ca: certs.caPem, agent, headers },
      (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (data += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
      },
    );
    req.on('error', reject);
    req.end(c.body);
  });
}

/** Throws (and so fails the property) when an answer breaks the contract. */
function checkReply(c: { path: string; body: string }, reply: Reply): void {
  if (reply.status === 400 || reply.status === 413) {
    const message = (JSON.parse(reply.body) as { message?: unknown }).message;
    if (typeof message !== 'string' || message.length === 0)
      throw new Error(`${reply.status} without a message: ${reply.body.slice(0, 200)}`);
    return;
  }
  if (reply.status !== 200) throw new Error(`status ${reply.status}: ${reply.body.slice(0, 200)}`);
  const sent = JSON.parse(c.body) as { request: { uid: string } };
  const answer = JSON.parse(reply.body) as {
    apiVersion: string;
    kind: string;
    response: { uid: string; allowed: boolean; patch?: string; patchType?: string };
  };
  if (answer.apiVersion !== 'admission.k8s.io/v1' || answer.kind !== 'AdmissionReview')
    throw new Error(`not an AdmissionReview: ${reply.body.slice(0, 200)}`);
  if (answer.response.uid !== sent.request.uid) throw new Error('the uid is not echoed');
  if (c.path === '/mutate-node' && answer.response.allowed !== true) throw new Error('the mutating webhook denied');
  if (answer.response.patch === undefined) return;
  if (answer.response.patchType !== 'JSONPatch') throw new Error('a patch without patchType JSONPatch');
  const ops = JSON.parse(Buffer.from(answer.response.patch, 'base64').toString('utf8')) as {
    op: string;
    path: string;
    value: unknown;
  }[];
  for (const op of ops) {
    if (!['add', 'replace', 'remove'].includes(op.op)) throw new Error(`a ${op.op} operation`);
    // The watcher's label namespace (its opt-out aside): a key in it the watcher did not write is
    // replaced or removed, at CREATE and where Karpenter's registration rewrites the record.
    const label = /^\/metadata\/labels\/veneer\.io~1(.*)$/.exec(op.path);
    if (label?.[1] === 'opt-out') throw new Error(`the opt-out label touched: ${op.op}`);
    if (op.op !== 'add' && !label && op.path !== '/metadata/annotations/veneer.io~1overlay-decision')
      throw new Error(`a ${op.op} outside the record: ${op.path}`);
    if (op.op === 'remove') continue;
    if (label && !(typeof op.value === 'string' && isValidLabelValue(op.value)))
      throw new Error(`invalid label value ${JSON.stringify(op.value)} for ${op.path}`);
    if (
      !label &&
      !['/metadata/labels', '/metadata/annotations', '/metadata/annotations/veneer.io~1overlay-decision'].includes(
        op.path,
      )
    )
      throw new Error(`a patch outside the record: ${op.path}`);
  }
}

async function rssMb(): Promise<number> {
  return counter(await metricsOf(replica.metricsPort), 'process_resident_memory_bytes', {}) / 2 ** 20;
}

/** The replica's live heap after a full GC, through the inspector protocol. */
const replicaHeapMb = () => liveHeapMb(inspectorUrl(replica.output()));

async function fuzz(runs: number, seedBase: number): Promise<{ statuses: Map<number, number> }> {
  const statuses = new Map<number, number>();
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, i) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      try {
        await fc.assert(
          fc.asyncProperty(fuzzCase, async (c) => {
            const reply = await post(agent, c);
            statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
            checkReply(c, reply);
          }),
          { numRuns: Math.ceil(runs / CLIENTS), seed: seedBase + i, endOnFailure: true },
        );
      } finally {
        agent.destroy();
      }
    }),
  );
  return { statuses };
}

t.test(`${RUNS} generated bodies: no crash, no 5xx, every rejection a 400 or 413 with a message`, async (t) => {
  const seed = Number(process.env.VENEER_FUZZ_SEED ?? Date.now() % 1_000_000);
  t.comment(`seed ${seed} (rerun with VENEER_FUZZ_SEED=${seed})`);
  const warmup = await fuzz(Math.min(2000, RUNS), seed);
  const [heapAfterWarmup, rssAfterWarmup] = [await replicaHeapMb(), await rssMb()];
  const started = Date.now();
  const main = await fuzz(RUNS, seed + CLIENTS);
  const seconds = (Date.now() - started) / 1000;
  const [heapAfter, rssAfter] = [await replicaHeapMb(), await rssMb()];
  const statuses = new Map<number, number>();
  for (const run of [warmup, main]) for (const [s, n] of run.statuses) statuses.set(s, (statuses.get(s) ?? 0) + n);
  t.same(
    [...statuses.keys()].filter((s) => s >= 500),
    [],
    'no 5xx',
  );
  t.equal(replica.child.exitCode, null, 'the process is still running');
  t.equal((await fetch(`http://127.0.0.1:${replica.healthPort}/healthz`)).status, 200, 'and healthy');
  const metrics = await metricsOf(replica.metricsPort);
  t.equal(
    counter(metrics, 'veneer_nodewatcher_labeling_errors_total', { error_type: 'webhook_internal' }),
    0,
    'no internal error on any input',
  );
  const patched = counter(metrics, 'veneer_nodewatcher_admission_requests_total', {
    webhook: 'mutate',
    outcome: 'patched',
  });
  t.ok(patched >= RUNS / 100, `${patched} reviews reached a decision and got a record patch, each checked`);
  // RSS keeps what large bodies made V8 and malloc reserve; the live heap after a full GC is
  // what a leak would grow. (Its absolute size is inflated by the inspector itself: about
  // 175 MB before any case, against about 45 MB without --inspect.)
  const memory = `live heap after GC ${heapAfterWarmup.toFixed(1)} MB after warm-up, ${heapAfter.toFixed(1)} MB after ${RUNS} more cases (RSS ${rssAfterWarmup.toFixed(0)} -> ${rssAfter.toFixed(0)} MB)`;
  t.ok(heapAfter - heapAfterWarmup <= 5, `memory flat: ${memory}`);
  t.comment(`${RUNS} cases in ${seconds.toFixed(1)} s; statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
  console.error(
    `fuzz figures: ${RUNS} cases in ${seconds.toFixed(1)} s (${Math.round(RUNS / seconds)}/s), statuses ${JSON.stringify(Object.fromEntries(statuses))}, ${patched} patched; ${memory}`,
  );
});
