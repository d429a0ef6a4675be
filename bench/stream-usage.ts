/**
 * `npm run bench:stream-usage`: what counting an OpenAI stream's tokens costs per forwarded chunk
 * (src/proxy/stream-usage.ts), measured side by side in one run: the scanner counting only (the
 * client asked for usage, or the backend gives none), the scanner holding events to drop the
 * usage-only one (the client did not ask), and the body splice that asks the backend for usage.
 *
 * The stream is vLLM-shaped: one `chat.completion.chunk` event per token (content of 4 chars), a
 * finish event, the usage event and `[DONE]`, cut into network chunks of BENCH_CHUNK bytes (0: one
 * event per chunk, the common case on loopback). Beside them, the floor of any scan of those bytes:
 * a bare loop counting line feeds — on a loaded machine the ratio to it is the figure that holds. Knobs: BENCH_TOKENS (500 per stream), BENCH_STREAMS
 * (2000), BENCH_CHUNK (0).
 */
import { performance } from 'node:perf_hooks';
import { SseUsageScanner, usagePlan } from '../src/proxy/stream-usage.js';
import { envInt } from './common.js';

const TOKENS = envInt('BENCH_TOKENS', 500, 1);
const STREAMS = envInt('BENCH_STREAMS', 2000, 1);
const CHUNK = envInt('BENCH_CHUNK', 0, 0);

const ev = (o: object): string => `data: ${JSON.stringify(o)}\n\n`;
const events: string[] = [];
for (let i = 0; i < TOKENS; i++)
  events.push(
    ev({
      id: 'chatcmpl-1',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'm',
      choices: [{ index: 0, delta: { content: 'abcd' }, logprobs: null, finish_reason: null }],
    }),
  );
events.push(ev({ id: 'chatcmpl-1', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
events.push(ev({ id: 'chatcmpl-1', choices: [], usage: { prompt_tokens: 9, completion_tokens: TOKENS } }));
events.push('data: [DONE]\n\n');
const whole = Buffer.from(events.join(''));
const chunks: Buffer[] = [];
if (CHUNK === 0) for (const e of events) chunks.push(Buffer.from(e));
else for (let i = 0; i < whole.length; i += CHUNK) chunks.push(whole.subarray(i, i + CHUNK));

/** The floor of any byte scan: a bare loop counting line feeds. */
function lineFeeds(b: Buffer): number {
  let n = 0;
  for (let i = 0; i < b.length; i++) if (b[i] === 10) n++;
  return n;
}

type Mode = 'none' | 'floor' | 'count' | 'drop';
const MODES: readonly Mode[] = ['none', 'floor', 'count', 'drop'];

function run(mode: Mode): { nsPerChunk: number; tokens: number } {
  let sink = 0;
  let tokens = 0;
  const t0 = performance.now();
  if (mode === 'floor') for (let s = 0; s < STREAMS; s++) for (const c of chunks) sink += lineFeeds(c);
  else
    for (let s = 0; s < STREAMS; s++) {
      const sc = mode !== 'count' && mode !== 'drop' ? undefined : new SseUsageScanner(mode === 'drop');
      for (const c of chunks) sink += sc ? sc.push(c).length : c.length;
      if (sc) {
        sink += sc.end().length;
        tokens = sc.usage?.completionTokens ?? -1;
      }
    }
  const ns = ((performance.now() - t0) * 1e6) / (STREAMS * chunks.length);
  if (sink < 0) console.log(sink);
  return { nsPerChunk: ns, tokens };
}

const body = {
  model: 'm',
  stream: true,
  messages: [{ role: 'user', content: 'x'.repeat(4000) }],
};
const raw = Buffer.from(JSON.stringify(body));
function splice(): number {
  const n = 20_000;
  const t0 = performance.now();
  let len = 0;
  for (let i = 0; i < n; i++) len += usagePlan(raw, body, true).body!.length;
  if (len < 0) console.log(len);
  return ((performance.now() - t0) * 1e6) / n;
}

for (const m of MODES) run(m); // warm-up
const rows = MODES.map((m) => ({ mode: m, ...run(m) }));
const base = rows[0]!.nsPerChunk;
const floor = rows[1]!.nsPerChunk;
console.log(
  `stream of ${TOKENS} tokens in ${chunks.length} chunks (${CHUNK === 0 ? 'one event each' : `${CHUNK} B each`}), ${STREAMS} streams`,
);
for (const r of rows)
  console.log(
    `${r.mode.padEnd(6)} ${r.nsPerChunk.toFixed(0).padStart(6)} ns/chunk  (+${(r.nsPerChunk - base).toFixed(0)} ns over forwarding alone, ${(r.nsPerChunk / floor).toFixed(2)}x a bare byte loop)  usage read: ${r.mode === 'count' || r.mode === 'drop' ? r.tokens : '-'}`,
  );
console.log(`splice stream_options into a ${raw.length}-byte body: ${splice().toFixed(0)} ns`);
