// The decision cache in front of TokenReview and SubjectAccessReview, with a fake apiserver
// and a fake clock: what is cached and for how long, the bounds, and that no token is kept or
// logged. test/apiserver/metrics-auth.test.ts proves the same against the real apiserver.
import t from 'tap';
import type { AccessReviews, UserInfo } from '../../src/kube/access-review.ts';
import { createLogger } from '../../src/log.ts';
import {
  bearerToken,
  DENY_TTL_MS,
  jwtExpiryMs,
  MAX_ALLOWED_ENTRIES,
  MAX_DENIED_ENTRIES,
  MetricsAuth,
  REVIEW_BURST,
  REVIEWS_PER_SECOND,
} from '../../src/server/metrics-auth.ts';

const jwt = (claims: object) =>
  `eyJhbGciOiJSUzI1NiJ9.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.c2lnbmF0dXJl`;

/** Tokens starting with `ok-` belong to a user allowed to read metrics, `no-` to one who is not; `down` means the apiserver is unreachable. */
function fakeApiserver() {
  const calls = { authenticate: 0, authorize: 0 };
  const state = { down: false, delayMs: 0 };
  const reviews: AccessReviews = {
    async authenticate(token) {
      calls.authenticate++;
      if (state.delayMs) await new Promise((r) => setTimeout(r, state.delayMs));
      if (state.down) throw Object.assign(new Error(`connect ECONNREFUSED (token ${token})`), { name: 'TypeError' });
      return token.startsWith('ok-') || token.startsWith('no-') || token.startsWith('eyJ')
        ? { username: token.startsWith('no-') ? 'stranger' : 'prometheus', groups: ['system:serviceaccounts'] }
        : undefined;
    },
    async authorize(user: UserInfo, verb, path) {
      calls.authorize++;
      return user.username === 'prometheus' && verb === 'get' && path === '/metrics';
    },
  };
  return { calls, state, reviews };
}

function setup(allowTTLMs = 60_000) {
  const api = fakeApiserver();
  const clock = { now: 1_000_000 };
  let logged = '';
  const log = createLogger('debug', {
    write: (line: string) => {
      logged += line;
    },
  });
  const auth = new MetricsAuth({ reviews: api.reviews, allowTTLMs, log, now: () => clock.now });
  return { ...api, clock, auth, logged: () => logged };
}

t.test('the Authorization header: only a bearer token', async (t) => {
  t.equal(bearerToken('Bearer abc.def'), 'abc.def');
  t.equal(bearerToken('bearer  abc '), 'abc', 'scheme case-insensitive, spaces tolerated');
  t.equal(bearerToken(undefined), undefined);
  t.equal(bearerToken('Basic dXNlcjpwYXNz'), undefined);
  t.equal(bearerToken('Bearer'), undefined);
  t.equal(bearerToken('Bearer a b'), undefined);
});

t.test("a JWT's expiry, and nothing from what is not one", async (t) => {
  t.equal(jwtExpiryMs(jwt({ exp: 1700000000 })), 1_700_000_000_000);
  t.equal(jwtExpiryMs(jwt({ sub: 'x' })), undefined);
  t.equal(jwtExpiryMs('opaque-token'), undefined);
  t.equal(jwtExpiryMs('a.!!!.c'), undefined);
  t.equal(jwtExpiryMs(`a.${Buffer.from('{"exp":"soon"}').toString('base64url')}.c`), undefined);
});

t.test('verdicts: none without a token, and a 15 s scrape costs no API call after the first', async (t) => {
  const s = setup();
  t.same(await s.auth.check(undefined), { result: 'unauthenticated' });
  t.same(s.calls, { authenticate: 0, authorize: 0 }, 'no token, no call');
  t.same(await s.auth.check('Bearer ok-1'), { result: 'allowed', user: 'prometheus' });
  for (let i = 0; i < 3; i++) {
    s.clock.now += 15_000;
    t.same(await s.auth.check('Bearer ok-1'), { result: 'allowed', user: 'prometheus' });
  }
  t.same(
    s.calls,
    { authenticate: 1, authorize: 1 },
    'one TokenReview and one SubjectAccessReview for four scrapes in 45 s',
  );
  s.clock.now += 15_001;
  await s.auth.check('Bearer ok-1');
  t.same(s.calls, { authenticate: 2, authorize: 2 }, 'asked again once the TTL passed');
  t.same(await s.auth.check('Bearer no-1'), { result: 'forbidden', user: 'stranger' });
  t.same(await s.auth.check('Bearer junk'), { result: 'unauthenticated' });
  t.same(s.calls, { authenticate: 4, authorize: 3 }, 'an unknown token is never authorized');
});

t.test('refusals are cached briefly, errors not at all', async (t) => {
  const s = setup();
  await s.auth.check('Bearer no-1');
  await s.auth.check('Bearer junk');
  s.clock.now += DENY_TTL_MS - 1;
  await s.auth.check('Bearer no-1');
  await s.auth.check('Bearer junk');
  t.same(s.calls, { authenticate: 2, authorize: 1 }, 'within the deny TTL: no call');
  s.clock.now += 2;
  await s.auth.check('Bearer no-1');
  t.same(s.calls, { authenticate: 3, authorize: 2 }, 'after it: asked again (a new grant takes effect)');
  s.state.down = true;
  t.same(await s.auth.check('Bearer ok-2'), { result: 'error' });
  t.same(await s.auth.check('Bearer ok-2'), { result: 'error' });
  t.equal(s.calls.authenticate, 5, 'an error is not remembered');
  s.state.down = false;
  t.same(
    await s.auth.check('Bearer ok-2'),
    { result: 'allowed', user: 'prometheus' },
    'and the next scrape after recovery passes',
  );
  t.notMatch(s.logged(), /ok-2/, 'the error from the API call is logged without its text, which could hold the token');
  t.match(s.logged(), /"kind":"network"/);
});

t.test('a short TTL setting also shortens the deny TTL', async (t) => {
  const s = setup(2000);
  await s.auth.check('Bearer no-1');
  s.clock.now += 2001;
  await s.auth.check('Bearer no-1');
  t.equal(s.calls.authenticate, 2);
});

t.test('an accepted token is not trusted past its own expiry', async (t) => {
  const s = setup();
  const token = jwt({ exp: (s.clock.now + 5000) / 1000 });
  t.same(await s.auth.check(`Bearer ${token}`), { result: 'allowed', user: 'prometheus' });
  s.clock.now += 4000;
  await s.auth.check(`Bearer ${token}`);
  t.equal(s.calls.authenticate, 1);
  s.clock.now += 1001;
  await s.auth.check(`Bearer ${token}`);
  t.equal(s.calls.authenticate, 2, "asked again at the token's exp, long before the 60 s TTL");
});

t.test('scrapes with the same token at the same time share one review', async (t) => {
  const s = setup();
  s.state.delayMs = 20;
  const verdicts = await Promise.all(Array.from({ length: 10 }, () => s.auth.check('Bearer ok-1')));
  t.ok(verdicts.every((v) => v.result === 'allowed'));
  t.same(s.calls, { authenticate: 1, authorize: 1 });
});

t.test('a flood of random tokens: bounded API calls, bounded memory, Prometheus unaffected', async (t) => {
  const s = setup();
  await s.auth.check('Bearer ok-prometheus');
  const before = s.calls.authenticate;
  const flood = await Promise.all(Array.from({ length: 200 }, (_, i) => s.auth.check(`Bearer random-${i}`)));
  t.equal(s.calls.authenticate - before, REVIEW_BURST - 1, 'at the same instant, only the burst is checked');
  t.equal(
    flood.filter((v) => v.result === 'throttled').length,
    200 - (REVIEW_BURST - 1),
    'the rest are told to retry (429)',
  );
  // A sustained flood, 100 new tokens every 100 ms for 120 s: checked at the refill rate only.
  for (let step = 0; step < 1200; step++) {
    s.clock.now += 100;
    await Promise.all(Array.from({ length: 100 }, (_, i) => s.auth.check(`Bearer random-${step}-${i}`)));
  }
  const checked = s.calls.authenticate - before;
  t.ok(checked <= REVIEW_BURST + 120 * REVIEWS_PER_SECOND, `${checked} TokenReviews for 120,200 random tokens`);
  t.equal(s.auth.cached.denied, MAX_DENIED_ENTRIES, 'refusals held: capped');
  t.same(
    await s.auth.check('Bearer ok-prometheus'),
    { result: 'allowed', user: 'prometheus' },
    'Prometheus, its entry expired during the flood, is checked again at once, not throttled',
  );
  t.equal(s.calls.authorize, 2, 'its entry was not pushed out by the flood (a cache of its own)');
});

t.test('the caches are capped', async (t) => {
  const s = setup(600_000);
  for (let i = 0; i < MAX_ALLOWED_ENTRIES + 50; i++) {
    s.clock.now += 1000 / REVIEWS_PER_SECOND;
    await s.auth.check(`Bearer ok-${i}`);
  }
  t.equal(s.auth.cached.allowed, MAX_ALLOWED_ENTRIES);
  const calls = s.calls.authenticate;
  await s.auth.check(`Bearer ok-${MAX_ALLOWED_ENTRIES + 49}`);
  t.equal(s.calls.authenticate, calls, 'the newest is kept');
  s.clock.now += 1000;
  await s.auth.check('Bearer ok-0');
  t.equal(s.calls.authenticate, calls + 1, 'the least recently used was dropped');
});

t.test('the token is never kept: entries are keyed by an HMAC', async (t) => {
  const s = setup();
  const token = 'ok-a-secret-token-value';
  await s.auth.check(`Bearer ${token}`);
  const held = JSON.stringify([
    ...(s.auth as unknown as { allowed: { entries: Map<string, unknown> } }).allowed.entries,
  ]);
  t.notMatch(held, /secret-token/);
  t.match(held, /^\[\["[A-Za-z0-9+/]{43}=",/, 'a 256-bit digest as the key');
});
