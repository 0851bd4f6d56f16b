// AWS_KEYS and KWOK_KEYS against the providers' own code: test/judges/aws-instance-keys builds instance
// types and offerings with karpenter-provider-aws's instancetype provider (and Karpenter's KWOK
// provider) and prints the keys of their requirements. scripts/control-plane.sh builds it into
// the cache, keyed by the hash of its sources, like the judges.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t from 'tap';
import { binary } from '../../kit/control-plane.ts';
import { AWS_KEYS, KWOK_KEYS } from '../../src/engine/providers.ts';

const run = promisify(execFile);

interface ProviderOutput {
  version: string;
  karpenterVersion: string;
  instanceTypeKeys: string[];
  offeringKeys: string[];
  instanceTypeKeysNotAlways: string[];
  offeringKeysNotAlways: string[];
  kwok: { instanceTypeKeys: string[]; offeringKeys: string[] };
}

const sorted = (keys: Iterable<string>) => [...keys].sort();

const { stdout } = await run(binary('awsInstanceKeys'), [], { maxBuffer: 4 << 20 });
const out = JSON.parse(stdout) as ProviderOutput;

t.test('the AWS provider version is the one paired with the Karpenter core the engine follows', async (t) => {
  t.equal(out.version, 'v1.14.3');
  t.equal(out.karpenterVersion, 'v1.14.3');
});

t.test('AWS_KEYS: the keys the AWS provider puts in instance-type requirements', async (t) => {
  t.same(
    sorted(AWS_KEYS.instanceTypeKeys),
    out.instanceTypeKeys,
    'AWS_KEYS.instanceTypeKeys (-: only the provider has it, +: only AWS_KEYS)',
  );
  // Keys a NodeClass setting or the type's zones decide; the rest are on every type, as DoesNotExist when absent.
  t.same(out.instanceTypeKeysNotAlways, [
    'karpenter.k8s.aws/placement-group-id',
    'karpenter.k8s.aws/placement-group-partition',
    'topology.k8s.aws/zone-id',
  ]);
});

t.test('AWS_KEYS: the keys the AWS provider puts in offering requirements', async (t) => {
  t.same(
    sorted(AWS_KEYS.offeringKeys),
    out.offeringKeys,
    'AWS_KEYS.offeringKeys (-: only the provider has it, +: only AWS_KEYS)',
  );
  t.same(
    sorted(AWS_KEYS.offeringKeys).filter((k) => !AWS_KEYS.instanceTypeKeys.has(k)),
    [],
    'every AWS offering key is an instance-type key too',
  );
});

t.test('KWOK_KEYS: the keys the KWOK provider puts in instance-type requirements', async (t) => {
  t.same(
    sorted(KWOK_KEYS.instanceTypeKeys),
    out.kwok.instanceTypeKeys,
    'KWOK_KEYS.instanceTypeKeys (-: only the provider has it, +: only KWOK_KEYS)',
  );
});

t.test(
  "KWOK_KEYS: its offerings carry its embedded catalog's keys, and region from a catalog of our own",
  async (t) => {
    t.same(sorted(KWOK_KEYS.offeringKeys), sorted([...out.kwok.offeringKeys, 'topology.kubernetes.io/region']));
  },
);
