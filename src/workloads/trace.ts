/**
 * Trace replay (open loop), streamed from a file (or lines in memory: a generator's, e.g.
 * prefix-heavy.ts) in one of four formats:
 *   - llmlb (JSONL, one request per line; also what `serve` captures, src/trace/):
 *       {"at": 0.25, "model": "llama3", "prompt": "…", "outputTokens": 120}
 *       {"at": 0.40, "api": "openai-chat", "messages": [{"role": "user", "content": "…"}], "outputTokens": 80, "sessionKey": "u7"}
 *       {"at": 0.90, "promptTokens": 512, "outputTokens": 64}       ← lengths only: text is synthesized
 *       {"at": 1.20, "promptTokens": 300, "outputTokens": 9, "blockTokens": 64, "blocks": ["9f0c…", "41aa…"]}  ← captured
 *     Fields are those of WorkloadRequest plus `at` (seconds from start), `promptTokens`, the prompt's
 *     block hashes (`blocks`, `blockTokens` tokens each) and what a capture records for reports
 *     (`backend`, `ttftS`, `e2eS`, `status`). `id` defaults to `l<line>`, `model`/`api` to the
 *     workload's.
 *   - mooncake, azure, burstgpt: the public traces (trace-mooncake.ts, trace-azure.ts,
 *     trace-burstgpt.ts show a sample of each).
 * The llmlb format's schema is in trace-llmlb.ts. The format is guessed from the first line when
 * not given. Requests known by lengths and block ids
 * only get a short stand-in text and exact token counts (trace-blocks.ts), so memory and time stay
 * flat in prompt length; memory is flat in trace length too (the file is read in chunks, requests
 * built as the replay reaches them).
 *
 * Lines may come slightly out of time order (a capture writes a request when it ends): they are
 * sent sorted by time (ties in file order) through a window of REORDER_WINDOW lines. Blank lines are
 * skipped. A bad line is an error naming the file, line and field, or with `skipBad` is skipped and
 * counted (TraceReplay.stats, which `llmlb whatif` reports).
 */
import { isChatApi } from '../api/endpoints.js';
import { z } from 'zod';
import { flattenMessages } from '../core/prompt.js';
import { createRng, deriveSeed } from '../core/rng.js';
import { countTokens } from '../engine/tokens.js';
import { ApiSchema, DEFAULT_MODEL, parseParams, positiveInt, requestFromMessages } from './common.js';
import { TextSource } from './text.js';
import { chainBlockIds, standInText, uniqueState } from './trace-blocks.js';
import { azureFormat } from './trace-azure.js';
import { burstgptFormat } from './trace-burstgpt.js';
import { LineError, TraceError, type TraceEntry, type TraceFormat } from './trace-format.js';
import { DEFAULT_BLOCK_TOKENS, llmlbFormat, type TraceLine } from './trace-llmlb.js';
import { readLines } from './trace-lines.js';
import { mooncakeFormat } from './trace-mooncake.js';
import type { ChatMessage, ClientDriver, ScheduledRequest, WorkloadRequest } from './types.js';

export { TraceError } from './trace-format.js';
export { DEFAULT_BLOCK_TOKENS, llmlbFormat, TraceLineSchema, type TraceLine } from './trace-llmlb.js';

export const TRACE_FORMATS: readonly TraceFormat[] = [
  llmlbFormat,
  mooncakeFormat,
  azureFormat,
  burstgptFormat,
];
export const TraceFormatSchema = z.enum(['llmlb', 'mooncake', 'azure', 'burstgpt']);
export type TraceFormatName = z.output<typeof TraceFormatSchema>;

export const traceParamsSchema = z.strictObject({
  /** The trace file; a scenario resolves a relative path against the scenario file's folder. */
  path: z.string().min(1),
  /** Guessed from the file's first line when absent. */
  format: TraceFormatSchema.optional(),
  /** Replay speed: 2 sends the trace twice as fast (at / rateScale). */
  rateScale: z.number().finite().positive().default(1),
  /** Replay only the first `limit` requests (after the window and sampling, in time order). */
  limit: positiveInt.optional(),
  /** Time window on the trace's clock (seconds from its start): requests before startS are dropped
   * and the replay starts at startS; requests at or after endS are dropped. */
  startS: z.number().finite().nonnegative().default(0),
  endS: z.number().finite().positive().optional(),
  /** Keep each request with this probability (seeded; 1 = all). */
  sample: z.number().gt(0).lte(1).default(1),
  /** Skip malformed lines (counted) instead of failing on the first. */
  skipBad: z.boolean().default(false),
  /** Drop requests sent at or after durationS (the scenario fills it in). */
  durationS: z.number().finite().positive().optional(),
  /** Defaults for lines without their own. */
  model: z.string().min(1).default(DEFAULT_MODEL),
  api: ApiSchema.default('openai-completions'),
});
export type TraceParams = z.input<typeof traceParamsSchema>;

/**
 * Where a replay's lines come from: a file, read in chunks on every pass, or lines already in
 * memory (a generator's), so both take the same importer.
 */
export interface TraceSource {
  /** Names the source in errors (`name:line: …`). */
  readonly name: string;
  /** `[lineNumber, text]` for each line, 1-based, blank lines included. */
  lines(): Iterable<[number, string]>;
}

export function fileSource(path: string): TraceSource {
  return { name: path, lines: () => readLines(path) };
}

export function memorySource(name: string, lines: readonly string[]): TraceSource {
  return {
    name,
    *lines() {
      for (let i = 0; i < lines.length; i++) yield [i + 1, lines[i]!];
    },
  };
}

/** The format of a trace file from its first non-blank line; TraceError when none matches. */
export function guessTraceFormat(path: string): TraceFormat {
  return guessFormat(fileSource(path));
}

function guessFormat(source: TraceSource): TraceFormat {
  let first: string | undefined;
  for (const [, text] of source.lines())
    if (text.trim() !== '') {
      first = text;
      break;
    }
  if (first === undefined) throw new TraceError(source.name, 1, undefined, 'empty trace');
  const line = first;
  const f = TRACE_FORMATS.find((x) => x.detect(line));
  if (!f)
    throw new TraceError(
      source.name,
      1,
      undefined,
      `cannot tell the trace format from its first line; give format: ${TraceFormatSchema.options.join(' | ')}`,
    );
  return f;
}

export function traceFormat(name: TraceFormatName): TraceFormat {
  return TRACE_FORMATS.find((f) => f.name === name)!;
}

/** Parse JSONL text (llmlb format) into validated lines with their line numbers. Throws TraceError. */
export function parseTrace(text: string, source: string): { line: number; entry: TraceLine }[] {
  const read = llmlbFormat.reader();
  const out: { line: number; entry: TraceLine }[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.trim();
    if (raw === '') continue;
    try {
      const entry = read(raw)!;
      out.push({ line: i + 1, entry: { ...entry, id: entry.id ?? `l${i + 1}` } });
    } catch (e) {
      if (e instanceof LineError) throw new TraceError(source, i + 1, e.field, e.message);
      throw e;
    }
  }
  return out;
}

/** What a pass over the file saw. */
export interface TraceStats {
  /** Non-blank lines read (headers included). */
  lines: number;
  /** Requests replayed (after window, sampling, limit and durationS). */
  requests: number;
  /** Malformed lines skipped (skipBad). */
  skipped: number;
  /** The first skipped line's error. */
  firstBad: string | undefined;
  /** Prompt and output tokens of the replayed requests. */
  promptTokens: number;
  outputTokens: number;
  /** Send time of the last replayed request, s. */
  lastAtS: number;
  /** Models the replayed requests name (a trace names few). */
  models: string[];
  /**
   * Every line kept (after the window and sampling) came at or after the one before: a replay
   * with these parameters needs no reorder window (TraceReplayOptions.inOrder).
   */
  inOrder: boolean;
}

export interface TraceReplayOptions {
  /**
   * The caller knows (from a check pass's stats.inOrder, same file and parameters) that the kept
   * lines are in time order: each is sent as soon as it is read, not held in the reorder window.
   */
  readonly inOrder?: boolean | undefined;
}

/** Lines a capture may be out of time order by: the reorder buffer's size. */
export const REORDER_WINDOW = 65_536;

interface Pending {
  readonly t: number;
  readonly order: number;
  readonly line: number;
  readonly entry: TraceEntry & Partial<TraceLine>;
}

function before(a: Pending, b: Pending): boolean {
  return a.t < b.t || (a.t === b.t && a.order < b.order);
}

/** A min-heap by (time, file order): the reorder window. */
class PendingHeap {
  private readonly a: Pending[] = [];
  get size(): number {
    return this.a.length;
  }
  push(p: Pending): void {
    const a = this.a;
    let i = a.length;
    a.push(p);
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (!before(p, a[up]!)) break;
      a[i] = a[up]!;
      i = up;
    }
    a[i] = p;
  }
  pop(): Pending | undefined {
    const a = this.a;
    const top = a[0];
    const last = a.pop();
    if (a.length === 0 || last === undefined) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= a.length) break;
      const r = l + 1;
      const c = r < a.length && before(a[r]!, a[l]!) ? r : l;
      if (!before(a[c]!, last)) break;
      a[i] = a[c]!;
      i = c;
    }
    a[i] = last;
    return top;
  }
}

type Params = z.output<typeof traceParamsSchema>;
/** What a replay needs besides its lines. */
type ReplayParams = Omit<Params, 'path'>;

/**
 * A trace replay: start() materialises the requests (the live bench), stream() yields them one at
 * a time (the simulator). Each pass rereads the source; the same seed gives the same requests.
 */
export class TraceReplay implements ClientDriver {
  readonly format: TraceFormat;
  /** Of the latest completed pass. */
  stats: TraceStats = emptyStats();

  /** Lines held to sort out of order ones (0: each line is sent as soon as it is read). */
  private readonly window: number;

  constructor(
    private readonly source: TraceSource,
    private readonly p: ReplayParams,
    private readonly seed: number,
    opts: TraceReplayOptions = {},
  ) {
    this.format = p.format !== undefined ? traceFormat(p.format) : guessFormat(source);
    this.window = opts.inOrder === true ? 0 : REORDER_WINDOW;
  }

  start(): ScheduledRequest[] {
    return [...this.pass()];
  }

  stream(): Iterator<ScheduledRequest> {
    return this.pass();
  }

  /** A full pass: every request built (only check's counting pass yields null). */
  private pass(): Generator<ScheduledRequest> {
    return this.requests(true) as Generator<ScheduledRequest>;
  }

  onFinish(): ScheduledRequest[] {
    return [];
  }

  /**
   * One full pass (validation at load; whatif's counts). Requests known by their lengths and
   * blocks are counted, not built: their stand-in texts and chains are the costly part of a
   * pass, and the counts need only the line.
   */
  check(): TraceStats {
    for (const _ of this.requests(false)) void _;
    return this.stats;
  }

  /** Whether the line's request carries text (as written or synthesized), else a stand-in. */
  private textBearing(e: Pending['entry']): boolean {
    return (
      e.prompt !== undefined ||
      e.messages !== undefined ||
      (e.blocks === undefined && this.format === llmlbFormat)
    );
  }

  /** `build` false: stand-in requests are counted and yielded as null, not built. */
  private *requests(build: boolean): Generator<ScheduledRequest | null> {
    const p = this.p;
    const path = this.source.name;
    const stats = emptyStats();
    const read = this.format.reader();
    const sampleRng = createRng(deriveSeed(this.seed, 'trace-sample'));
    const make = this.builder();
    const window = this.window;
    const heap = new PendingHeap();
    let origin: number | undefined = this.format.absoluteTime ? undefined : 0;
    let order = 0;
    let lastT = -Infinity;
    let lastPushedT = -Infinity;
    let done = false;

    const emit = (q: Pending): ScheduledRequest | null | undefined => {
      lastT = q.t;
      const at = (q.t - p.startS) / p.rateScale;
      if (
        (p.limit !== undefined && stats.requests >= p.limit) ||
        (p.durationS !== undefined && at >= p.durationS)
      ) {
        done = true;
        return undefined;
      }
      if (!build && !this.textBearing(q.entry)) {
        // What the built request would count (the builder's stand-in branch).
        const e = q.entry;
        const model = e.model ?? p.model;
        stats.requests++;
        stats.promptTokens += e.promptTokens ?? 0;
        stats.outputTokens += e.outputTokens;
        stats.lastAtS = at;
        if (!stats.models.includes(model)) stats.models.push(model);
        return null;
      }
      const s = make(q, at);
      stats.requests++;
      stats.promptTokens +=
        s.request.promptTokens ?? countTokens(s.request.prompt ?? flattenMessages(s.request.messages ?? []));
      stats.outputTokens += s.request.outputTokens;
      stats.lastAtS = at;
      if (!stats.models.includes(s.request.model)) stats.models.push(s.request.model);
      return s;
    };

    for (const [n, text] of this.source.lines()) {
      if (text.trim() === '') continue;
      stats.lines++;
      let entry: TraceEntry | undefined;
      try {
        entry = read(text);
      } catch (e) {
        if (!(e instanceof LineError)) throw e;
        const err = new TraceError(path, n, e.field, e.message);
        if (!p.skipBad) throw err;
        stats.skipped++;
        stats.firstBad ??= err.message;
        continue;
      }
      if (entry === undefined) continue;
      origin ??= entry.at;
      const t = entry.at - origin;
      if (t < p.startS || (p.endS !== undefined && t >= p.endS)) continue;
      if (p.sample < 1 && sampleRng() >= p.sample) continue;
      if (t < lastPushedT) stats.inOrder = false;
      lastPushedT = t;
      if (t < lastT) {
        throw new TraceError(
          path,
          n,
          'at',
          `time ${t}s is before requests already replayed: the trace is more than ${REORDER_WINDOW} lines out of order`,
        );
      }
      heap.push({ t, order: order++, line: n, entry: entry as Pending['entry'] });
      if (heap.size > window) {
        const s = emit(heap.pop()!);
        if (done) break;
        if (s !== undefined) yield s;
      }
    }
    while (!done && heap.size > 0) {
      const s = emit(heap.pop()!);
      if (s !== undefined) yield s;
    }
    this.stats = stats;
  }

  /** Builds the request of a line: text-bearing llmlb lines as written, others with a stand-in text. */
  private builder(): (q: Pending, at: number) => ScheduledRequest {
    const p = this.p;
    const seed = this.seed;
    // Built on first use: only llmlb lines with a length and no text draw filler (its word pool
    // costs ~30 ms to build, for nothing on block traces).
    let text: TextSource | undefined;
    const rng = createRng(deriveSeed(seed, 'trace-text'));
    const chat = isChatApi(p.api);
    return (q, at) => {
      const e = q.entry;
      const id = e.id ?? `l${q.line}`;
      const api = e.api ?? p.api;
      const model = e.model ?? p.model;
      if (this.textBearing(e)) {
        const messages: ChatMessage[] = e.messages ?? [
          {
            role: 'user',
            content: e.prompt ?? (text ??= new TextSource(seed)).fill(rng, e.promptTokens ?? 0, `[${id}] `),
          },
        ];
        const request = requestFromMessages(
          {
            id,
            model,
            api,
            outputTokens: e.outputTokens,
            maxTokens: e.maxTokens,
            sessionKey: e.sessionKey,
            label: e.label,
            task: e.task,
            sizeClass: e.sizeClass,
          },
          messages,
        );
        return { at, request: e.timeoutS !== undefined ? { ...request, timeoutS: e.timeoutS } : request };
      }
      // Lengths and block ids only: stand-in text, exact counts (trace-blocks.ts).
      const promptTokens = e.promptTokens ?? 0;
      const prefixBlocks = {
        blockTokens: e.blockTokens ?? DEFAULT_BLOCK_TOKENS,
        chain: e.blocks ? chainBlockIds(e.blocks) : [],
      };
      const tailState = uniqueState(id, seed);
      const content = standInText(prefixBlocks, promptTokens, tailState);
      const isChat = e.api !== undefined ? isChatApi(e.api) : chat;
      const request: WorkloadRequest = {
        id,
        model,
        api,
        ...(isChat ? { messages: [{ role: 'user', content }] } : { prompt: content }),
        outputTokens: e.outputTokens,
        ...(e.maxTokens !== undefined ? { maxTokens: e.maxTokens } : {}),
        ...(e.sessionKey !== undefined ? { sessionKey: e.sessionKey } : {}),
        ...(e.label !== undefined ? { label: e.label } : {}),
        ...(e.timeoutS !== undefined ? { timeoutS: e.timeoutS } : {}),
        promptTokens,
        prefixBlocks,
        tailState,
      };
      return { at, request };
    };
  }
}

function emptyStats(): TraceStats {
  return {
    lines: 0,
    requests: 0,
    skipped: 0,
    firstBad: undefined,
    promptTokens: 0,
    outputTokens: 0,
    lastAtS: 0,
    models: [],
    inOrder: true,
  };
}

export function traceWorkload(
  params: TraceParams,
  seed: number,
  opts: { check?: boolean } & TraceReplayOptions = {},
): TraceReplay {
  const { path, ...p } = parseParams(traceParamsSchema, params);
  const replay = new TraceReplay(fileSource(path), p, seed, { inOrder: opts.inOrder });
  // A whole pass now, so a scenario with a bad trace fails at load, not mid-run (callers that
  // checked the file already skip it).
  if (opts.check !== false) replay.check();
  return replay;
}

/**
 * A replay of lines in memory (a generator's), with the file replay's params less `path`; no
 * check pass (the caller made the lines).
 */
export function replayLines(
  source: TraceSource,
  params: Omit<TraceParams, 'path'>,
  seed: number,
  opts: TraceReplayOptions = {},
): TraceReplay {
  const { path: _, ...p } = parseParams(traceParamsSchema, { ...params, path: source.name });
  return new TraceReplay(source, p, seed, opts);
}
