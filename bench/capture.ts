/**
 * `npm run bench:capture`: what the trace capture (src/trace/capture.ts) costs per request, in
 * CPU, for the request bench:proxy sends (its 101-char Ollama prompt: no full 64-token block) and
 * for a long chat prompt (6.7 KB, 26 blocks, a session key).
 *
 * - record(): TraceCapture.record end to end — the line, the buffer, the batched writes to a file
 *   in the temp dir (process.cpuUsage counts libuv's write threads too) — REQS records per round,
 *   yielding to the event loop every 50 records as a server does between requests (so the writes
 *   keep up: a round that drops a line fails).
 * - line: serializing alone, the pre-2026-11-25 way (an object with spreads + JSON.stringify, hex
 *   per block via Number#toString) against captureLine; every line is checked to be identical.
 *
 * A tight loop keeps the capture's code and data in cache; on the request path they are cold, and
 * cost several times more per request (docs/results.md, "Trace capture cost"): this bench ranks
 * changes, bench:proxy's in-situ figures size them.
 *
 * BENCH_BASE=REV adds `record() @ REV`: git revision REV's src/trace/capture.ts (imported from a
 * temp dir, the rest of src/ as it is now), measured in the same rounds, order alternating.
 * Knobs: BENCH_REQS (100000 records per round), BENCH_ROUNDS (5).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setImmediate as yieldLoop } from 'node:timers/promises';
import { blockHashHex, promptBlockHashes } from '../src/engine/tokens.js';
import {
  CAPTURE_BLOCK_TOKENS,
  captureLine,
  hashKey,
  TraceCapture,
  type CaptureEntry,
} from '../src/trace/capture.js';
import { GENERATE_BODY } from './common.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const REQS = Math.max(1000, Math.floor(Number(process.env.BENCH_REQS ?? 100_000)));
const ROUNDS = Math.max(1, Math.floor(Number(process.env.BENCH_ROUNDS ?? 5)));
const BASE = process.env.BENCH_BASE;
const ORIGIN = 1_764_000_000_000;
const YIELD_EVERY = 50;

const proxyPrompt = (JSON.parse(GENERATE_BODY) as { prompt: string }).prompt;
const system = 'You are a careful assistant. Answer briefly and cite the document. '.repeat(100);

/** Entry i of a shape: times vary the way real requests' do (fractional ms). */
function proxyEntry(i: number): CaptureEntry {
  const e2e = 3.2 + (i % 97) * 0.0137;
  return {
    arrivalMs: ORIGIN + i * 0.0931,
    model: 'm',
    api: 'ollama-generate',
    promptText: proxyPrompt,
    promptTokens: 1,
    outputTokens: 1,
    maxTokens: 16,
    sessionKey: undefined,
    backend: i % 2 ? 'a' : 'b',
    ttftMs: e2e - 0.41,
    e2eMs: e2e,
    status: 200,
  };
}
function chatEntry(i: number): CaptureEntry {
  const e2e = 812.5 + (i % 89) * 1.37;
  return {
    arrivalMs: ORIGIN + i * 13.7,
    model: 'llama3.1:8b',
    api: 'openai-chat',
    promptText: `${system}\nuser ${i % 50}: question ${i}`,
    promptTokens: 1700 + (i % 40),
    outputTokens: 120 + (i % 300),
    maxTokens: 512,
    sessionKey: `user-${i % 50}`,
    backend: `gpu-${i % 4}`,
    ttftMs: 95.3 + (i % 7),
    e2eMs: e2e,
    status: 200,
  };
}
const SHAPES = { proxy: proxyEntry, chat: chatEntry } as const;
type Shape = keyof typeof SHAPES;
const SHAPE_NAMES = Object.keys(SHAPES) as Shape[];
const ENTRIES: Record<Shape, CaptureEntry[]> = {
  proxy: Array.from({ length: 1000 }, (_, i) => proxyEntry(i)),
  chat: Array.from({ length: 1000 }, (_, i) => chatEntry(i)),
};

/** The line as record() built it before 2026-11-25 (object + JSON.stringify): the reference. */
function legacyLine(e: CaptureEntry, originMs: number): string {
  const r3 = (x: number): number => Math.round(x * 1000) / 1000;
  const text = e.promptText;
  const blocks = promptBlockHashes(text, CAPTURE_BLOCK_TOKENS).map(blockHashHex);
  return JSON.stringify({
    at: Math.max(0, r3((e.arrivalMs - originMs) / 1000)),
    model: e.model,
    api: e.api,
    promptTokens: e.promptTokens ?? Math.ceil(text.length / 4),
    outputTokens: Math.max(1, e.outputTokens ?? 1),
    ...(e.maxTokens !== undefined ? { maxTokens: e.maxTokens } : {}),
    ...(e.sessionKey !== undefined && e.sessionKey !== '' ? { sessionKey: hashKey(e.sessionKey) } : {}),
    blockTokens: CAPTURE_BLOCK_TOKENS,
    blocks,
    ...(e.backend !== undefined ? { backend: e.backend } : {}),
    ...(e.ttftMs !== undefined ? { ttftS: r3(e.ttftMs / 1000) } : {}),
    e2eS: r3(e.e2eMs / 1000),
    status: e.status,
  });
}

interface Capturer {
  record(e: CaptureEntry): void;
  close(): Promise<void>;
  readonly recorded: number;
  readonly dropped: number;
}
type CapturerClass = new (o: { file: string; maxBytes: number; keep: number; originMs: number }) => Capturer;

const cpuUs = (c: NodeJS.CpuUsage): number => c.user + c.system;

/** REQS records through a fresh capture (written, drained, closed): CPU µs per record. */
async function recordRound(Cls: CapturerClass, dir: string, shape: Shape): Promise<number> {
  const entries = ENTRIES[shape];
  const file = join(dir, `${shape}.jsonl`);
  rmSync(file, { force: true });
  const cap = new Cls({ file, maxBytes: 1e12, keep: 0, originMs: ORIGIN });
  const c0 = process.cpuUsage();
  for (let i = 0; i < REQS; i++) {
    cap.record(entries[i % entries.length]!);
    if (i % YIELD_EVERY === YIELD_EVERY - 1) await yieldLoop();
  }
  await cap.close();
  const us = cpuUs(process.cpuUsage(c0)) / REQS;
  if (cap.dropped > 0 || cap.recorded !== REQS)
    throw new Error(`${shape}: recorded ${cap.recorded}, dropped ${cap.dropped} of ${REQS}`);
  return us;
}

/** Serializing alone, REQS lines: CPU µs per line. */
function lineRound(shape: Shape, f: (e: CaptureEntry) => string): number {
  const entries = ENTRIES[shape];
  let bytes = 0;
  const c0 = process.cpuUsage();
  for (let i = 0; i < REQS; i++) bytes += f(entries[i % entries.length]!).length;
  const us = cpuUs(process.cpuUsage(c0)) / REQS;
  if (bytes === 0) throw new Error('no output');
  return us;
}

/** BENCH_BASE's capture.ts, written into `dir` with its tokens import pointed at today's src/. */
async function loadBase(rev: string, dir: string): Promise<CapturerClass> {
  const r = spawnSync('git', ['show', `${rev}:src/trace/capture.ts`], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`BENCH_BASE=${rev}: git show failed: ${r.stderr.trim()}`);
  const tokens = pathToFileURL(join(ROOT, 'src', 'engine', 'tokens.ts')).href;
  const file = join(dir, 'capture-base.ts');
  writeFileSync(file, r.stdout.replace(`'../engine/tokens.js'`, `'${tokens}'`));
  const mod = (await import(pathToFileURL(file).href)) as { TraceCapture: CapturerClass };
  return mod.TraceCapture;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const fmt = (xs: readonly number[]): string =>
  `${median(xs).toFixed(2)} µs (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`;

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-bench-capture-'));
  // Keeps the process up while a capture waits on its unref'd flush timer (a base revision's
  // close() can: see "drain() while a batch is being written" in capture.test.ts). Idle, not CPU.
  const keepAlive = setInterval(() => undefined, 1000);
  try {
    // The hand-built line must be the reference's, byte for byte, for every entry benchmarked.
    for (const s of SHAPE_NAMES)
      for (const e of ENTRIES[s])
        if (captureLine(e, ORIGIN, false) !== legacyLine(e, ORIGIN))
          throw new Error(
            `${s}: captureLine differs:\n${captureLine(e, ORIGIN, false)}\n${legacyLine(e, ORIGIN)}`,
          );
    const variants: [string, CapturerClass][] = [['record()', TraceCapture]];
    if (BASE) variants.push([`record() @ ${BASE.slice(0, 12)}`, await loadBase(BASE, dir)]);
    console.log(
      `bench:capture — node ${process.version}; ${ROUNDS} round(s) of ${REQS} records per shape and variant ` +
        `(proxy: ${proxyPrompt.length}-char prompt, ${promptBlockHashes(proxyPrompt, CAPTURE_BLOCK_TOKENS).length} blocks; ` +
        `chat: ${ENTRIES.chat[0]!.promptText.length} chars, ${promptBlockHashes(ENTRIES.chat[0]!.promptText, CAPTURE_BLOCK_TOKENS).length} blocks)`,
    );
    const lineVariants: [string, (e: CaptureEntry) => string][] = [
      ['line: object + JSON.stringify', (e) => legacyLine(e, ORIGIN)],
      ['line: captureLine', (e) => captureLine(e, ORIGIN, false)],
    ];
    // Warm-up round (not counted): V8 optimizes every path before timing.
    for (const s of SHAPE_NAMES) {
      for (const [, C] of variants) await recordRound(C, dir, s);
      for (const [, f] of lineVariants) lineRound(s, f);
    }
    const got = new Map<string, number[]>();
    const add = (k: string, v: number): void => void (got.get(k) ?? got.set(k, []).get(k)!).push(v);
    for (let r = 0; r < ROUNDS; r++)
      for (const s of SHAPE_NAMES) {
        const rv = r % 2 ? [...variants].reverse() : variants;
        for (const [name, C] of rv) add(`${s}\t${name}`, await recordRound(C, dir, s));
        const lv = r % 2 ? [...lineVariants].reverse() : lineVariants;
        for (const [name, f] of lv) add(`${s}\t${name}`, lineRound(s, f));
      }
    console.log('CPU per record, median of rounds (range)');
    for (const [k, xs] of got) {
      const [s, name] = k.split('\t');
      console.log(`  ${s!.padEnd(6)} ${name!.padEnd(32)} ${fmt(xs)}`);
    }
    for (const s of SHAPE_NAMES) {
      const pair = (a: string, b: string): string | undefined => {
        const xa = got.get(`${s}\t${a}`);
        const xb = got.get(`${s}\t${b}`);
        if (!xa || !xb) return undefined;
        const ratios = xa.map((x, i) => x / xb[i]!);
        return `${(median(ratios) * 100).toFixed(0)} % (${(Math.min(...ratios) * 100).toFixed(0)}–${(Math.max(...ratios) * 100).toFixed(0)} %)`;
      };
      const line = pair('line: captureLine', 'line: object + JSON.stringify');
      console.log(`  ${s}: captureLine / object + JSON.stringify ${line}`);
      if (BASE) console.log(`  ${s}: record() / record() @ base ${pair('record()', variants[1]![0])}`);
    }
  } finally {
    clearInterval(keepAlive);
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
