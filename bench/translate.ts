/**
 * `npm run bench:translate`: what converting a streamed chat completion costs the router, per
 * translation (OpenAI SSE → Ollama NDJSON, → Responses events, → Anthropic Messages events) and
 * for the one SSE decoder alone (src/api/sse.ts) that all three read with, beside the inline
 * splitter the translators each had before it.
 *
 * The input is what vLLM sends for an answer of BENCH_TOKENS tokens (default 500): one
 * `chat.completion.chunk` event per token, a finish event, the usage event, `[DONE]`, cut into
 * chunks of BENCH_CHUNK bytes (default 1,400: one TCP segment each, the worst realistic case for
 * events split across chunks). Each translator converts the whole stream BENCH_ITER times per
 * round (default 200), BENCH_ROUNDS rounds (default 7); reported: the median µs per stream and
 * per token, and the range over rounds. CPU only, in this process: no sockets.
 */
import { performance } from 'node:perf_hooks';
import { ChatSseToMessages } from '../src/api/anthropic.js';
import { ChatSseToResponses } from '../src/api/openai-responses.js';
import { SseDecoder } from '../src/api/sse.js';
import { SseToNdjson } from '../src/proxy/translate.js';

const TOKENS = Number(process.env.BENCH_TOKENS ?? 500);
const CHUNK = Number(process.env.BENCH_CHUNK ?? 1400);
const ITER = Number(process.env.BENCH_ITER ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);

function upstream(): Buffer[] {
  const base = { id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1, model: 'm' };
  let s = '';
  for (let i = 0; i < TOKENS; i++) {
    const delta = i === 0 ? { role: 'assistant', content: 'word' } : { content: ` w${i % 97}` };
    s += `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: null }] })}\n\n`;
  }
  s += `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`;
  s += `data: ${JSON.stringify({ ...base, choices: [], usage: { prompt_tokens: 100, completion_tokens: TOKENS } })}\n\n`;
  s += 'data: [DONE]\n\n';
  const b = Buffer.from(s);
  const out: Buffer[] = [];
  for (let i = 0; i < b.length; i += CHUNK) out.push(b.subarray(i, i + CHUNK));
  return out;
}

interface Converter {
  push(chunk: Buffer): string;
  end(totalMs: number): string;
}

/** The splitter each translator had before the one decoder (#33), kept here as the reference. */
class InlineSplitter {
  private buf = '';
  push(chunk: Buffer): string[] {
    this.buf += chunk.toString('utf8');
    const out: string[] = [];
    let sep: number;
    while ((sep = this.buf.indexOf('\n\n')) >= 0) {
      out.push(this.buf.slice(0, sep));
      this.buf = this.buf.slice(sep + 2);
    }
    return out;
  }
  end(): undefined {
    return undefined;
  }
}

const TARGETS: [string, () => Converter | { push(c: Buffer): unknown; end(): unknown }][] = [
  ['SSE decoder alone', () => new SseDecoder()],
  ['(before: inline splitter)', () => new InlineSplitter()],
  ['→ Ollama NDJSON', () => new SseToNdjson('chat', 'm')],
  ['→ Responses events', () => new ChatSseToResponses('m')],
  ['→ Anthropic Messages events', () => new ChatSseToMessages('m', [])],
];

const chunks = upstream();
const bytes = chunks.reduce((n, c) => n + c.length, 0);
console.log(
  `bench:translate — node ${process.version}; a ${TOKENS}-token streamed chat completion (${bytes} bytes in ${chunks.length} chunks of ${CHUNK}), ${ITER} streams × ${ROUNDS} rounds per target`,
);
const rows: string[][] = [];
let sink = 0;
for (const [name, make] of TARGETS) {
  const perStream: number[] = [];
  for (let r = 0; r < ROUNDS + 1; r++) {
    const t0 = performance.now();
    for (let i = 0; i < ITER; i++) {
      const c = make();
      for (const chunk of chunks) {
        const out = c.push(chunk);
        sink += typeof out === 'string' ? out.length : Array.isArray(out) ? out.length : 0;
      }
      const last = c.end(0);
      sink += typeof last === 'string' ? last.length : 0;
    }
    if (r > 0) perStream.push(((performance.now() - t0) * 1000) / ITER); // round 0 warms up
  }
  perStream.sort((a, b) => a - b);
  const med = perStream[Math.floor(perStream.length / 2)]!;
  rows.push([
    name,
    med.toFixed(0),
    ((med * 1000) / TOKENS).toFixed(0),
    `${perStream[0]!.toFixed(0)} – ${perStream[perStream.length - 1]!.toFixed(0)}`,
    (((bytes / med) * 1e6) / 2 ** 20).toFixed(0),
  ]);
}
const head = ['target', 'µs/stream', 'ns/token', 'range µs', 'MiB/s'];
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (r: string[]): string =>
  r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
console.log(line(head));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const r of rows) console.log(line(r));
if (sink < 0) console.log(sink); // keep the outputs alive
