import t from 'tap';
import { type ProcessResult, WorkQueue } from '../../src/kube/work-queue.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('one entry per key, never the same key twice at once, at most `concurrency` in flight', async (t) => {
  const seen: string[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const running = new Set<string>();
  let overlap = false;
  const q = new WorkQueue({
    concurrency: 2,
    process: async (key): Promise<ProcessResult> => {
      if (running.has(key)) overlap = true;
      running.add(key);
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      seen.push(key);
      await sleep(20);
      inFlight--;
      running.delete(key);
      return { kind: 'done' };
    },
  });
  for (const k of ['a', 'b', 'a', 'c', 'a', 'b']) q.add(k);
  t.equal(q.depth, 3, 'duplicates collapse while queued');
  q.start();
  await sleep(5);
  q.add('a'); // while a is processed: it runs once more afterwards, not in parallel
  await sleep(120);
  t.same(seen.sort(), ['a', 'a', 'b', 'c']);
  t.equal(maxInFlight, 2);
  t.notOk(overlap, 'a key is never processed twice at once');
  await q.stop();
});

t.test('failures are retried with growing back-off; delayed adds wait; pause lets in-flight work finish', async (t) => {
  const attempts: number[] = [];
  const retries: string[] = [];
  const q = new WorkQueue({
    concurrency: 1,
    backoffInitialMs: 20,
    backoffMaxMs: 1000,
    onRetry: (r) => retries.push(r),
    process: async (key): Promise<ProcessResult> => {
      if (key === 'flaky') {
        attempts.push(Date.now());
        if (attempts.length < 4) return { kind: 'retry', reason: 'conflict' };
      }
      if (key === 'throws') throw new Error('boom');
      return { kind: 'done' };
    },
  });
  q.start();
  q.add('flaky');
  await sleep(400);
  t.equal(attempts.length, 4, 'retried until it succeeded');
  const gaps = attempts.slice(1).map((a, i) => a - (attempts[i] ?? a));
  t.ok((gaps[2] ?? 0) >= 40, `back-off grows: gaps ${gaps.join(', ')} ms`);
  t.same(retries, ['conflict', 'conflict', 'conflict']);
  q.add('throws');
  await sleep(30);
  t.equal(retries.at(-1), 'boom', 'a thrown error is a retry, not a crash');
  const before = Date.now();
  let ranAt = 0;
  let runs = 0;
  const delayed = new WorkQueue({
    concurrency: 1,
    process: async () => {
      ranAt ||= Date.now();
      runs++;
      return { kind: 'done' };
    },
  });
  delayed.start();
  delayed.addAfter('x', 100);
  delayed.addAfter('x', 300); // a later delay never postpones an earlier one
  for (let i = 0; i < 100 && ranAt === 0; i++) await sleep(20);
  t.ok(ranAt - before >= 95, `ran after ${ranAt - before} ms, not before its delay`);
  await sleep(400);
  t.equal(runs, 1, 'the later delay was folded into the earlier one, not run again');
  await delayed.stop();
  await q.stop();
});
