import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SseUsageScanner, usagePlan } from './stream-usage.js';

const ev = (o: object): string => `data: ${JSON.stringify(o)}\n\n`;
const chunk = (content: string): string =>
  ev({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content } }] });
const finish = ev({ id: 'c1', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
const usageEv = ev({
  id: 'c1',
  choices: [],
  usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
});
const DONE = 'data: [DONE]\n\n';

/** Feeds `text` to a scanner in pieces of `size` bytes; returns what was forwarded. */
function run(scan: SseUsageScanner, text: string, size: number): string {
  const b = Buffer.from(text);
  const out: Buffer[] = [];
  for (let i = 0; i < b.length; i += size) out.push(scan.push(b.subarray(i, i + size)));
  out.push(scan.end());
  return Buffer.concat(out).toString();
}

const plan = (o: Record<string, unknown>, gives = true): ReturnType<typeof usagePlan> =>
  usagePlan(Buffer.from(JSON.stringify(o)), o, gives);

test('usagePlan splices stream_options into a body without it, keeping every other byte', () => {
  const raw = Buffer.from(' {"model":"m","stream":true,"messages":[]}');
  const p = usagePlan(raw, JSON.parse(raw.toString()) as Record<string, unknown>, true);
  assert.equal(p.scan, 'drop');
  assert.equal(
    p.body!.toString(),
    ' {"stream_options":{"include_usage":true},"model":"m","stream":true,"messages":[]}',
  );
  assert.deepEqual(JSON.parse(p.body!.toString()).stream_options, { include_usage: true });
});

test('usagePlan: a client that asked needs nothing; other options are kept; odd ones are counted', () => {
  assert.deepEqual(plan({ model: 'm', stream: true, stream_options: { include_usage: true } }), {
    scan: 'none',
  });
  const other = plan({ model: 'm', stream: true, stream_options: { include_usage: false, foo: 1 } });
  assert.equal(other.scan, 'drop');
  assert.deepEqual(JSON.parse(other.body!.toString()).stream_options, { include_usage: true, foo: 1 });
  assert.deepEqual(plan({ model: 'm', stream: true, stream_options: 'yes' }), { scan: 'count' });
  const nul = plan({ model: 'm', stream: true, stream_options: null });
  assert.deepEqual(JSON.parse(nul.body!.toString()).stream_options, { include_usage: true });
  // usage in every event would reach the client
  assert.deepEqual(plan({ model: 'm', stream: true, stream_options: { continuous_usage_stats: true } }), {
    scan: 'count',
  });
  // a backend configured streamUsage: false is sent the body as it came
  assert.deepEqual(plan({ model: 'm', stream: true }, false), { scan: 'count' });
});

test('a usage-only event the router asked for is dropped, whatever the chunking, and its counts kept', () => {
  const stream = chunk('Hel') + chunk('lo') + chunk('!') + finish + usageEv + DONE;
  const expected = chunk('Hel') + chunk('lo') + chunk('!') + finish + DONE;
  for (const size of [1, 3, 7, 64, 10_000]) {
    const scan = new SseUsageScanner(true);
    assert.equal(run(scan, stream, size), expected, `chunks of ${size}`);
    assert.deepEqual(scan.usage, { promptTokens: 7, completionTokens: 3 });
    assert.equal(scan.contentEvents, 3);
  }
});

test('CRLF event separators are understood', () => {
  const crlf = (s: string): string => s.replace(/\n/g, '\r\n');
  const scan = new SseUsageScanner(true);
  const out = run(scan, crlf(chunk('a') + usageEv + DONE), 5);
  assert.equal(out, crlf(chunk('a') + DONE));
  assert.equal(scan.usage?.completionTokens, 3);
});

test('counting only: every byte forwarded as it came; events with text counted when no usage came', () => {
  const stream =
    ev({ choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] }) +
    chunk('one') +
    chunk('"quoted usage"') +
    ev({ choices: [{ index: 0, delta: { reasoning_content: 'hm' } }] }) +
    ev({ choices: [{ index: 0, text: 'x', finish_reason: null }] }) +
    finish +
    DONE;
  const scan = new SseUsageScanner(false);
  const b = Buffer.from(stream);
  const pieces = [b.subarray(0, 50), b.subarray(50, 51), b.subarray(51)];
  for (const p of pieces) assert.equal(scan.push(p), p, 'forwarded untouched');
  assert.equal(scan.end().length, 0);
  assert.equal(scan.usage, undefined);
  assert.equal(scan.contentEvents, 4);
});

test('a client that asked for usage still gets it (counting mode keeps the usage event)', () => {
  const stream = chunk('a') + usageEv + DONE;
  const scan = new SseUsageScanner(false);
  assert.equal(run(scan, stream, 4), stream);
  assert.equal(scan.usage?.completionTokens, 3);
});

test('a last event without its blank line goes out at the end; a huge non-event is not held', () => {
  const scan = new SseUsageScanner(true);
  assert.equal(run(scan, chunk('a') + 'data: [DONE]', 3), chunk('a') + 'data: [DONE]');
  const big = new SseUsageScanner(true);
  const junk = Buffer.alloc((1 << 20) + 10, 'x');
  assert.equal(big.push(junk).length, junk.length);
  assert.equal(big.push(Buffer.from(usageEv)).toString(), usageEv);
});
