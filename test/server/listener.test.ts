// The listeners' address: `::` (both families) where the kernel has IPv6, 0.0.0.0 where it has none.
// The real binds over [::1] and 127.0.0.1 are in test/apiserver/serve.test.ts; a kernel without IPv6 cannot be
// had here, so its refusals are played by the bind.
import t from 'tap';
import { anyAddress } from '../../src/server/listener.ts';

const refusing = (code: string) => async () => {
  throw Object.assign(new Error(`listen ${code} ::`), { code });
};

function recorder() {
  const said: unknown[][] = [];
  return { log: { warn: (...args: unknown[]) => void said.push(args) }, said };
}

t.test('this machine binds `::`, and says nothing', async (t) => {
  const { log, said } = recorder();
  t.equal(await anyAddress(log as never), '::');
  t.same(said, []);
});

t.test('a kernel without IPv6: 0.0.0.0, said once with the reason', async (t) => {
  for (const code of ['EAFNOSUPPORT', 'EADDRNOTAVAIL']) {
    const { log, said } = recorder();
    t.equal(await anyAddress(log as never, refusing(code)), '0.0.0.0', code);
    t.same(said, [[{ code }, 'no IPv6 on this kernel: listening on 0.0.0.0 (IPv4 only)']]);
  }
});

t.test('any other failure is not a missing IPv6, and is not hidden', async (t) => {
  const { log, said } = recorder();
  await t.rejects(anyAddress(log as never, refusing('EACCES')), { code: 'EACCES' });
  await t.rejects(
    anyAddress(log as never, async () => {
      throw new Error('no code at all');
    }),
    /no code at all/,
  );
  t.same(said, []);
});
