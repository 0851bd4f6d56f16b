// AWS_KEYS and KWOK_KEYS against the providers' own code: test/aws-instance-keys builds instance
// types and offerings with karpenter-provider-aws's instancetype provider (and Karpenter's KWOK
// provider) and prints the keys of their requirements. The test builds that program into the
// cache itself, keyed by the hash of its sources: cold, it compiles the AWS SDK's EC2 client and
// Karpenter (minutes on 2 cores); warm, it only runs it.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { AWS_KEYS, KWOK_KEYS } from '../../src/engine/providers.ts';

const run = promisify(execFile);
const SRC = join(import.meta.dirname, '..', 'aws-instance-keys');
const BUILD_TIMEOUT_MS = 30 * 60_000;

interface ProviderOutput {
  version: string;
  karpenterVersion: string;
  instanceTypeKeys: string[];
  offeringKeys: string[];
  instanceTypeKeysNotAlways: string[];
  offeringKeysNotAlways: string[];
  kwok: { instanceTypeKeys: string[]; offeringKeys: string[] };
}

function cacheRoot(): string {
  const env = process.env;
  return env.VENEER_CACHE_DIR || join(env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache'), 'veneer-node-watcher');
}

/** The program's cached build, made when missing (go.mod and go.sum are committed tidy: the build must not change them). */
async function awsInstanceKeys(): Promise<string> {
  const hash = createHash('sha256');
  for (const f of ['go.mod', 'go.sum', 'main.go']) hash.update(readFileSync(join(SRC, f)));
  const dir = join(cacheRoot(), `aws-instance-keys-${hash.digest('hex').slice(0, 12)}`);
  const bin = join(dir, 'aws-instance-keys');
  if (existsSync(bin)) return bin;
  mkdirSync(dir, { recursive: true });
  t.setTimeout(BUILD_TIMEOUT_MS + 60_000);
  const tmp = `${bin}.tmp.${process.pid}`;
  const started = Date.now();
  try {
    await run('go', ['build', '-p', '2', '-trimpath', '-o', tmp, '.'], {
      cwd: SRC,
      env: { ...process.env, GOFLAGS: '-mod=readonly', GOTOOLCHAIN: 'local', CGO_ENABLED: '0' },
      timeout: BUILD_TIMEOUT_MS,
      maxBuffer: 16 << 20,
    });
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
  renameSync(tmp, bin);
  t.comment(`built ${bin} in ${Math.round((Date.now() - started) / 1000)} s`);
  return bin;
}

const sorted = (keys: Iterable<string>) => [...keys].sort();

const { stdout } = await run(await awsInstanceKeys(), [], { maxBuffer: 4 << 20 });
const out = JSON.parse(stdout) as ProviderOutput;

t.test('the AWS provider version is the one paired with the Karpenter core the engine follows', async (t) => {
  t.equal(out.version, 'v1.14.1');
  t.equal(out.karpenterVersion, 'v1.14.1');
});

t.test('AWS_KEYS: the keys the AWS provider puts in instance-type requirements', async (t) => {
  t.same(sorted(AWS_KEYS.instanceTypeKeys), out.instanceTypeKeys, 'AWS_KEYS.instanceTypeKeys (-: only the provider has it, +: only AWS_KEYS)');
  // Keys a NodeClass setting or the type's zones decide; the rest are on every type, as DoesNotExist when absent.
  t.same(out.instanceTypeKeysNotAlways, ['karpenter.k8s.aws/placement-group-id', 'karpenter.k8s.aws/placement-group-partition', 'topology.k8s.aws/zone-id']);
});

t.test('AWS_KEYS: the keys the AWS provider puts in offering requirements', async (t) => {
  t.same(sorted(AWS_KEYS.offeringKeys), out.offeringKeys, 'AWS_KEYS.offeringKeys (-: only the provider has it, +: only AWS_KEYS)');
  t.same(sorted(AWS_KEYS.offeringKeys).filter((k) => !AWS_KEYS.instanceTypeKeys.has(k)), [], 'every AWS offering key is an instance-type key too');
});

t.test('KWOK_KEYS: the keys the KWOK provider puts in instance-type requirements', async (t) => {
  t.same(sorted(KWOK_KEYS.instanceTypeKeys), out.kwok.instanceTypeKeys, 'KWOK_KEYS.instanceTypeKeys (-: only the provider has it, +: only KWOK_KEYS)');
});

t.test('KWOK_KEYS: its offerings carry its embedded catalog\'s keys, and region from a catalog of our own', async (t) => {
  t.same(sorted(KWOK_KEYS.offeringKeys), sorted([...out.kwok.offeringKeys, 'topology.kubernetes.io/region']));
});
