// The live heap of another Node process after a full GC, read through its inspector (on
// loopback). RSS keeps what the allocator and V8 reserve; the heap after GC is what is alive.
export async function liveHeapMb(inspectorUrl: string): Promise<number> {
  const ws = new WebSocket(inspectorUrl);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  let id = 0;
  const call = (method: string, params: object = {}) =>
    new Promise<{ result?: { value?: number } }>((resolve) => {
      const mine = ++id;
      ws.addEventListener('message', function answer(ev: MessageEvent) {
        const msg = JSON.parse(String(ev.data)) as { id?: number; result: { result?: { value?: number } } };
        if (msg.id !== mine) return;
        ws.removeEventListener('message', answer);
        resolve(msg.result);
      });
      ws.send(JSON.stringify({ id: mine, method, params }));
    });
  try {
    await call('HeapProfiler.collectGarbage');
    const used = await call('Runtime.evaluate', { expression: 'process.memoryUsage().heapUsed', returnByValue: true });
    return (used.result?.value ?? Number.NaN) / 2 ** 20;
  } finally {
    ws.close();
  }
}

/** The inspector URL a process printed (at start with --inspect, or on SIGUSR1). */
export function inspectorUrl(output: string): string {
  const url = /ws:\/\/127\.0\.0\.1:\d+\/[\w-]+/.exec(output)?.[0];
  if (!url) throw new Error('the process printed no inspector URL');
  return url;
}
