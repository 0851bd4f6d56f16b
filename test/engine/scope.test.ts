// The scope rule and the filters derived from it agree: the apiserver filters nodes by the label
// selector (the undecided-node watch) and the matchConditions (the mutating webhook) before the
// watcher sees them, so a filter narrower than scope() leaves nodes unrecorded until the
// reconciler's resync, and one wider than intended calls the webhook for nothing.
import t from 'tap';
import {
  CAPACITY_TYPE,
  parseSelector,
  recordKeys,
  toNodeClaimView,
  toNodeView,
  undecidedSelector,
  type Labels,
  type NodeClaimView,
  type RecordKeys,
} from '../../src/engine/index.ts';
import { CAPACITY_TYPES, mutatingMatchConditions, SCOPE, scope, type MatchCondition } from '../../src/engine/scope.ts';
import { calls, compile, ERROR, type Env } from '../support/cel.ts';

const NODEPOOL = SCOPE.nodePoolLabel;
const UNKNOWN_CAPACITY_TYPE = 'preemptible';
const CAPACITY_VALUES: (string | undefined)[] = [undefined, ...CAPACITY_TYPES, UNKNOWN_CAPACITY_TYPE];

/** A node's metadata.labels, `undefined` for a node that has none at all. */
type NodeLabels = Labels | undefined;

function nodeLabelSets(keys: RecordKeys): NodeLabels[] {
  const sets: NodeLabels[] = [undefined, {}];
  for (const pool of [undefined, 'default'])
    for (const capacityType of CAPACITY_VALUES)
      for (const record of [undefined, 'true', 'false', ''])
        for (const optOut of [undefined, 'true', 'false'])
          for (const other of [{}, { 'kubernetes.io/os': 'linux' }] as Labels[]) {
            const labels: Record<string, string> = { ...other };
            if (pool !== undefined) labels[NODEPOOL] = pool;
            if (capacityType !== undefined) labels[CAPACITY_TYPE] = capacityType;
            if (record !== undefined) labels[keys.influenced] = record;
            if (optOut !== undefined) labels[keys.optOut] = optOut;
            sets.push(labels);
          }
  return sets;
}

function claimLabelSets(): (Labels | undefined)[] {
  const sets: (Labels | undefined)[] = [undefined];
  for (const pool of [undefined, 'default'])
    for (const capacityType of CAPACITY_VALUES) {
      const labels: Record<string, string> = {};
      if (pool !== undefined) labels[NODEPOOL] = pool;
      if (capacityType !== undefined) labels[CAPACITY_TYPE] = capacityType;
      sets.push(labels);
    }
  return sets;
}

const node = (labels: NodeLabels) => toNodeView({ metadata: { name: 'n', ...(labels ? { labels } : {}) } });
const claim = (labels: Labels | undefined): NodeClaimView | undefined =>
  labels ? toNodeClaimView({ metadata: { name: 'c', labels } }) : undefined;

/** Registration copies the NodeClaim's labels onto the node, so a claim never contradicts its node. */
const consistent = (n: NodeLabels, c: Labels | undefined) =>
  !c || Object.entries(c).every(([k, v]) => n?.[k] === undefined || n[k] === v);

function needsRecord(n: NodeLabels, c: Labels | undefined, keys: RecordKeys, atCreate = false): boolean {
  const s = scope(node(n), claim(c), keys, atCreate);
  return s.inScope && !s.recorded;
}

/** The NodeClaim the mutating webhook's conditions assume: it brings the capacity type in scope when the node has none. */
const assumedClaim = (n: NodeLabels): Labels | undefined =>
  n?.[CAPACITY_TYPE] === undefined ? { [CAPACITY_TYPE]: SCOPE.capacityType } : undefined;

interface Forms {
  selector: string;
  conditions: readonly MatchCondition[];
}

/** Every way the forms disagree with scope() on the generated nodes, as readable lines; empty when they agree. */
function disagreements(forms: Forms, keys: RecordKeys): string[] {
  const selector = parseSelector(forms.selector);
  const admits = (n: NodeLabels, operation = 'UPDATE') => {
    const env: Env = { object: { metadata: n ? { name: 'n', labels: n } : { name: 'n' } }, request: { operation } };
    // An UPDATE that leaves the labels as they were: the node as scope() sees it.
    return calls(forms.conditions, operation === 'UPDATE' ? { ...env, oldObject: env.object! } : env);
  };
  const selects = (n: NodeLabels) => selector.matches(n ?? {});
  const found: string[] = [];
  const nodes = nodeLabelSets(keys);
  for (const n of nodes) {
    const label = JSON.stringify(n ?? null);
    // The conditions are scope() on the node's own labels, a missing capacity type taken as the one in scope.
    const expected = needsRecord(n, assumedClaim(n), keys);
    if (admits(n) !== expected)
      found.push(
        `conditions ${admits(n) ? 'admit' : 'refuse'} ${label}; scope() says ${expected ? 'record it' : 'no record'}`,
      );
    // At CREATE the record keys a node carries are not the watcher's: the decision replaces them.
    const atCreate = needsRecord(n, assumedClaim(n), keys, true);
    if (admits(n, 'CREATE') !== atCreate)
      found.push(
        `conditions ${admits(n, 'CREATE') ? 'admit' : 'refuse'} ${label} at CREATE; scope() says ${atCreate ? 'record it' : 'no record'}`,
      );
    // The selector is the same but for capacity types Karpenter does not know, which it cannot exclude.
    const capacityType = n?.[CAPACITY_TYPE];
    const unknown = capacityType !== undefined && !(CAPACITY_TYPES as readonly string[]).includes(capacityType);
    const selectable = unknown
      ? n?.[NODEPOOL] !== undefined && n[keys.influenced] === undefined && n[keys.optOut] !== 'true'
      : expected;
    if (selects(n) !== selectable) found.push(`selector ${selects(n) ? 'selects' : 'drops'} ${label}`);
    for (const c of claimLabelSets()) {
      if (!consistent(n, c) || !needsRecord(n, c, keys)) continue;
      // A node without the nodepool label reaches the filters when registration adds it.
      const seen = n?.[NODEPOOL] !== undefined ? n : { ...n, ...c };
      if (!admits(seen))
        found.push(`conditions refuse ${JSON.stringify(seen)}, in scope with NodeClaim ${JSON.stringify(c)}`);
      if (!selects(seen))
        found.push(`selector drops ${JSON.stringify(seen)}, in scope with NodeClaim ${JSON.stringify(c)}`);
    }
  }
  return found;
}

for (const ns of ['veneer.io', 'nodes.example.com']) {
  t.test(`the selector and the mutating conditions agree with scope() (${ns})`, async (t) => {
    const keys = recordKeys(ns);
    const forms = { selector: undecidedSelector(keys), conditions: mutatingMatchConditions(keys) };
    t.same(disagreements(forms, keys), []);
    t.ok(
      nodeLabelSets(keys).some((n) => needsRecord(n, assumedClaim(n), keys)),
      'some generated nodes are in scope',
    );
  });
}

t.test('the check fails forms that disagree', async (t) => {
  const keys = recordKeys('veneer.io');
  const selector = undecidedSelector(keys);
  const conditions = mutatingMatchConditions(keys);
  const others = CAPACITY_TYPES.filter((c) => c !== SCOPE.capacityType);
  const broken: [string, Forms][] = [
    ['the selector keeps recorded nodes', { selector: selector.replace(`,!${keys.influenced}`, ''), conditions }],
    ['the selector keeps opted-out nodes', { selector: selector.replace(`,${keys.optOut}!=true`, ''), conditions }],
    [
      'a record carried at CREATE taken for a record',
      {
        selector,
        conditions: conditions.map((c) =>
          c.name === 'no-record-yet-or-rewritten'
            ? { ...c, expression: c.expression.replace("request.operation == 'CREATE' || ", '') }
            : c,
        ),
      },
    ],
    ['an opted-out node admitted', { selector, conditions: conditions.filter((c) => c.name !== 'not-opted-out') }],
    [
      'the selector lets a known other capacity type through',
      { selector: selector.replace(others.join(','), others.slice(1).join(',') || 'x'), conditions },
    ],
    [
      'the selector wants the capacity type present',
      {
        selector: selector.replace(`${CAPACITY_TYPE} notin`, `${CAPACITY_TYPE},${CAPACITY_TYPE} notin`),
        conditions,
      },
    ],
    ['a condition dropped', { selector, conditions: conditions.slice(0, -1) }],
    [
      'the capacity type required',
      {
        selector,
        conditions: conditions.map((c) =>
          c.name === SCOPE.capacityType ? { ...c, expression: c.expression.replace(/^.*\|\| /, '') } : c,
        ),
      },
    ],
    [
      'another capacity type admitted',
      {
        selector,
        conditions: conditions.map((c) => ({
          ...c,
          expression: c.expression.replaceAll(`'${SCOPE.capacityType}'`, `'${others[0]}'`),
        })),
      },
    ],
  ];
  for (const [what, forms] of broken) t.not(disagreements(forms, keys).length, 0, what);
});

t.test('the selector excludes every capacity type Karpenter knows but the one in scope', async (t) => {
  const selector = undecidedSelector(recordKeys('veneer.io'));
  for (const c of CAPACITY_TYPES) {
    const labels = { [NODEPOOL]: 'default', [CAPACITY_TYPE]: c };
    t.equal(parseSelector(selector).matches(labels), c === SCOPE.capacityType, c);
  }
});

t.test('the CEL evaluator reads the shapes it is given and no others', async (t) => {
  const env = { object: { metadata: { labels: { a: 'x' } } } };
  t.equal(compile("has(object.metadata.labels) && 'a' in object.metadata.labels")(env), true);
  t.equal(compile("object.metadata.labels['b'] == 'x'")(env), ERROR, 'a missing key is an error');
  t.equal(
    compile("false && object.metadata.labels['b'] == 'x'")(env),
    false,
    '&& forgives an error when the other side is false',
  );
  t.equal(compile("['a', 'b'].exists(k, k in object.metadata.labels)")(env), true);
  t.equal(
    calls([{ expression: "object.metadata.labels['b'] == 'x'" }], env),
    false,
    'an erring condition does not call a webhook that ignores failures',
  );
  t.throws(() => compile('size(object) > 1'));
});

t.test("Karpenter's registration reaches the webhook when it rewrites the record, and only then", async (t) => {
  const keys = recordKeys('veneer.io');
  const conditions = mutatingMatchConditions(keys);
  const story = JSON.stringify({ influenced: true, overlay: 'ri', decidedBy: 'webhook', basis: 'exact' });
  const recorded = { [NODEPOOL]: 'default', [keys.influenced]: 'true', [keys.matchingOverlay]: 'ri' };
  const update = (before: Labels, after: Labels, annotations = { before: story, after: story }) =>
    calls(conditions, {
      request: { operation: 'UPDATE' },
      oldObject: {
        metadata: { name: 'n', labels: before, annotations: { [keys.decisionAnnotation]: annotations.before } },
      },
      object: { metadata: { name: 'n', labels: after, annotations: { [keys.decisionAnnotation]: annotations.after } } },
    });
  const registered = { 'karpenter.sh/registered': 'true' };
  t.ok(update(recorded, { ...recorded, ...registered, [keys.influenced]: 'false' }), 'a record key altered');
  t.ok(
    update(recorded, { ...recorded, ...registered, [`${keys.namespace}/team`]: 'x' }),
    'a key of the namespace added',
  );
  const { [keys.matchingOverlay]: _, ...without } = recorded;
  t.ok(update(recorded, { ...without, ...registered }), 'a record key removed');
  t.ok(update(recorded, { ...recorded, ...registered }, { before: story, after: '{}' }), 'the story rewritten');
  t.notOk(update(recorded, { ...recorded, ...registered }), 'the record left as it was: no call');
  t.notOk(
    update(recorded, { ...recorded, ...registered, [keys.optOut]: 'false' }),
    "the opt-out is the launcher's: no call",
  );
  t.notOk(
    update({ ...recorded, ...registered }, { ...recorded, ...registered, [keys.influenced]: 'false' }),
    'not the registration: the guard decides, not the webhook',
  );
});
