// Cutting a watch's bytes into events, however the network chunks them. The stream itself, from a
// real apiserver, is tested in test/apiserver/reflector.test.ts; here the splitter alone, pure.
import t from 'tap';
import fc from 'fast-check';
import { LineSplitter } from '../../src/kube/watch-stream.ts';

/** Every line the splitter hands over, copied (a line is a view valid only during the call). */
function split(chunks: Buffer[]): string[] {
  const splitter = new LineSplitter();
  const lines: string[] = [];
  for (const chunk of chunks) splitter.push(chunk, (line) => lines.push(line.toString('latin1')));
  return lines;
}

/** `bytes` cut at the given offsets. */
function cut(bytes: Buffer, offsets: number[]): Buffer[] {
  const at = [...new Set(offsets.map((o) => o % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const o of [...at, bytes.length]) {
    chunks.push(bytes.subarray(from, o));
    from = o;
  }
  return chunks;
}

t.test('any chunking gives the same lines, blank ones dropped', async (t) => {
  const line = fc.stringMatching(/^[a-z{}":,]{0,300}$/);
  fc.assert(
    fc.property(fc.array(line, { maxLength: 30 }), fc.array(fc.nat(), { maxLength: 40 }), (lines, offsets) => {
      const bytes = Buffer.from(lines.map((l) => `${l}\n`).join(''), 'latin1');
      t.same(
        split(cut(bytes, offsets)),
        lines.filter((l) => l.length > 0),
      );
    }),
  );
});

t.test('an event larger than the kept buffer, one byte a chunk at its edges, then small ones', async (t) => {
  const big = 'x'.repeat(600 * 1024);
  const bytes = Buffer.from(`a\n${big}\nb\nc`, 'latin1');
  const chunks = [bytes.subarray(0, 3), bytes.subarray(3, 4), bytes.subarray(4, bytes.length - 4)];
  for (let i = bytes.length - 4; i < bytes.length; i++) chunks.push(bytes.subarray(i, i + 1));
  const lines = split(chunks);
  t.same(
    lines.map((l) => l.length),
    [1, big.length, 1],
    'the unfinished last line waits for its newline',
  );
  t.equal(lines[1], big);
});

t.test('a line gathered from chunks is not overwritten by the next one before its call returns', async (t) => {
  const splitter = new LineSplitter();
  const seen: string[] = [];
  splitter.push(Buffer.from('{"first":'), () => t.fail('no line yet'));
  splitter.push(Buffer.from('1}\n{"second":'), (line) => seen.push(line.toString()));
  splitter.push(Buffer.from('2}\n'), (line) => seen.push(line.toString()));
  t.same(seen, ['{"first":1}', '{"second":2}']);
});
