/**
 * `llmlb profile`: engine profiles (src/engine/types.ts EngineProfile) from reality, for the
 * simulator and `llmlb whatif --profile`.
 *
 * - `--backend URL --model M`: a short, bounded probe of a live backend (about 20 requests):
 *   prefill seconds per token from prompts of growing length (one output token each); the decode
 *   step's cost per context token from a long and a short prompt decoding alone; its base and
 *   per-sequence cost from 1, 2, 4, 8 concurrent decodes; the most useful concurrency, where
 *   throughput stops growing (the engine's slots, as far as routing is concerned). Ollama reports
 *   prefill and decode durations itself; over the OpenAI API they are timed from the stream.
 * - `--trace capture.jsonl`: per-backend profiles from what `serve` captured: TTFT against prompt
 *   length gives prefill, decode time per token against the requests decoding beside it on the
 *   same backend gives the step's base and per-sequence cost.
 *
 * The engine model these fit (design §3): an iteration costs base + perSeq·running +
 * perToken·context (+ prefillPerToken·prompt for the one admitting a prompt), so every quantity
 * below is linear in what the probe varies. Written with speed 1: the constants are absolute.
 */
import { createReadStream, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { stringify } from 'yaml';
import { createRng } from '../core/rng.js';
import { OUTPUT_TOKENS_HEADER } from '../engine/server.js';
import type { EngineProfile } from '../engine/types.js';
import { CommandError, UsageError } from './usage-error.js';

export type ProbeApi = 'ollama' | 'openai';

export interface ProbeOptions {
  readonly backend: string;
  readonly model: string;
  readonly api: ProbeApi;
  /** Model seconds per real second of an emulated engine (`llmlb engine --time-scale`); default 1. */
  readonly timeScale?: number;
  /** Prompt lengths of the prefill probe, tokens (default 256, 1024, 2048, 4096). */
  readonly promptTokens?: readonly number[];
  /** Concurrency levels of the decode probe (default 1, 2, 4, 8). */
  readonly concurrency?: readonly number[];
  /** Tokens each decode probe generates (default 128). */
  readonly outputTokens?: number;
  /** Per-request limit, ms (default 120 s). */
  readonly timeoutMs?: number;
}

/** The fitted constants: the EngineProfile fields a probe can measure. */
export type MeasuredConstants = Pick<
  EngineProfile,
  'slots' | 'speed' | 'baseStepS' | 'perSeqS' | 'perTokenS' | 'prefillPerTokenS'
>;

export interface ProbeResult {
  readonly profile: MeasuredConstants;
  readonly maxUsefulConcurrency: number;
  /** Prefill seconds per prompt length. */
  readonly prefill: readonly { readonly promptTokens: number; readonly seconds: number }[];
  /** Mean decode step and throughput per concurrency level. */
  readonly decode: readonly {
    readonly concurrency: number;
    readonly stepS: number;
    readonly tokensPerS: number;
  }[];
  readonly requests: number;
  readonly wallS: number;
}

/** What one request showed: its prefill (TTFT) and mean decode step, in model seconds. */
interface Timing {
  readonly prefillS: number;
  readonly stepS: number;
  readonly outputTokens: number;
  /** From submit to the last token. */
  readonly totalS: number;
}

const SHORT_PROMPT = 4;
const LONG_PROMPT = 2048;
const WORDS = ['lor', 'ips', 'dol', 'sit', 'ame', 'con', 'sec', 'adi', 'eli', 'sed', 'tem', 'inc'];

/** A prompt of exactly `tokens` tokens (4 characters each) that no earlier probe shares a block with. */
function uniquePrompt(tokens: number, rng: () => number): string {
  let s = `${Math.floor(rng() * 1e9)
    .toString(36)
    .padStart(6, '0')
    .slice(0, 6)}  `; // 8 chars: 2 tokens, different for every prompt
  for (let i = 2; i < tokens; i++) s += `${WORDS[Math.floor(rng() * WORDS.length)]!} `;
  return s.slice(0, tokens * 4);
}

/** Ordinary least squares y = a + b·x. */
export function linearFit(xs: readonly number[], ys: readonly number[]): { a: number; b: number } {
  const n = xs.length;
  if (n === 0) return { a: 0, b: 0 };
  const mx = xs.reduce((s, x) => s + x, 0) / n;
  const my = ys.reduce((s, y) => s + y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i]! - mx) * (ys[i]! - my);
    sxx += (xs[i]! - mx) ** 2;
  }
  const b = sxx > 0 ? sxy / sxx : 0;
  return { a: my - b * mx, b };
}

async function ollamaRequest(o: ProbeOptions, prompt: string, n: number): Promise<Timing> {
  const res = await fetch(new URL('/api/generate', o.backend), {
    method: 'POST',
    headers: { 'content-type': 'application/json', [OUTPUT_TOKENS_HEADER]: String(n) },
    body: JSON.stringify({
      model: o.model,
      prompt,
      stream: false,
      options: { num_predict: n, temperature: 0 },
    }),
    signal: AbortSignal.timeout(o.timeoutMs ?? 120_000),
  });
  if (!res.ok) throw new Error(`${o.backend}: /api/generate answered ${res.status}: ${await res.text()}`);
  const b = (await res.json()) as Record<string, unknown>;
  const num = (k: string): number => (typeof b[k] === 'number' ? (b[k] as number) : 0);
  const scale = (o.timeScale ?? 1) / 1e9;
  const count = Math.max(1, num('eval_count'));
  // eval_duration covers tokens 2..n: the first comes out of prefill.
  return {
    prefillS: num('prompt_eval_duration') * scale,
    stepS: count > 1 ? (num('eval_duration') * scale) / (count - 1) : 0,
    outputTokens: count,
    totalS: num('total_duration') * scale,
  };
}

async function openaiRequest(o: ProbeOptions, prompt: string, n: number): Promise<Timing> {
  const t0 = performance.now();
  const res = await fetch(new URL('/v1/completions', o.backend), {
    method: 'POST',
    headers: { 'content-type': 'application/json', [OUTPUT_TOKENS_HEADER]: String(n) },
    body: JSON.stringify({ model: o.model, prompt, max_tokens: n, temperature: 0, stream: true }),
    signal: AbortSignal.timeout(o.timeoutMs ?? 120_000),
  });
  if (!res.ok || !res.body)
    throw new Error(`${o.backend}: /v1/completions answered ${res.status}: ${await res.text()}`);
  // Each SSE data line with text is one token (a vLLM-style stream); time the first and last.
  let first = 0;
  let last = 0;
  let tokens = 0;
  let buf = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    const now = performance.now();
    buf += decoder.decode(chunk as Uint8Array, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line.startsWith('data:') || line === 'data: [DONE]') continue;
      const ev = JSON.parse(line.slice(5)) as { choices?: { text?: string }[] };
      if (!ev.choices?.[0]?.text) continue;
      if (tokens === 0) first = now;
      last = now;
      tokens++;
    }
  }
  const k = (o.timeScale ?? 1) / 1000;
  return {
    prefillS: (first - t0) * k,
    stepS: tokens > 1 ? ((last - first) * k) / (tokens - 1) : 0,
    outputTokens: tokens,
    totalS: (last - t0) * k,
  };
}

/** Probe a live backend (see the file comment); throws on a failed request. */
export async function probeBackend(o: ProbeOptions): Promise<ProbeResult> {
  const t0 = performance.now();
  const rng = createRng(Date.now() % 2 ** 31);
  const send = o.api === 'ollama' ? ollamaRequest : openaiRequest;
  let requests = 0;
  const one = (tokens: number, n: number): Promise<Timing> => {
    requests++;
    return send(o, uniquePrompt(tokens, rng), n);
  };
  const lengths = o.promptTokens ?? [256, 1024, 2048, 4096];
  const levels = [...new Set(o.concurrency ?? [1, 2, 4, 8])].sort((a, b) => a - b);
  const out = o.outputTokens ?? 128;

  await one(SHORT_PROMPT, 2); // warm-up: the model loaded, connections open
  const prefill: { promptTokens: number; seconds: number }[] = [];
  for (const l of lengths) prefill.push({ promptTokens: l, seconds: (await one(l, 1)).prefillS });
  const long = await one(LONG_PROMPT, out);

  const decode: { concurrency: number; stepS: number; tokensPerS: number }[] = [];
  for (const c of levels) {
    const t = await Promise.all(Array.from({ length: c }, () => one(SHORT_PROMPT, out)));
    const tokens = t.reduce((s, x) => s + x.outputTokens, 0);
    const span = Math.max(...t.map((x) => x.totalS));
    decode.push({
      concurrency: c,
      stepS: t.reduce((s, x) => s + x.stepS, 0) / t.length,
      tokensPerS: span > 0 ? tokens / span : 0,
    });
  }

  // Throughput stops growing (under 10 % more for the next level): that level is the most useful.
  let best = decode[0]!;
  for (const d of decode.slice(1)) {
    if (d.tokensPerS < best.tokensPerS * 1.1) break;
    best = d;
  }
  const useful = decode.filter((d) => d.concurrency <= best.concurrency);
  const step1 = decode.find((d) => d.concurrency === 1)?.stepS ?? useful[0]!.stepS;
  // Decoding alone, a long prompt's step reads (LONG − SHORT) more context tokens.
  const perTokenS = Math.max(0, (long.stepS - step1) / (LONG_PROMPT - SHORT_PROMPT));
  // step(c) = base + c·(perSeq + perToken·(SHORT + out/2)): the mean context of a decoding sequence.
  const fit =
    useful.length > 1
      ? linearFit(
          useful.map((d) => d.concurrency),
          useful.map((d) => d.stepS),
        )
      : { a: step1, b: perTokenS * (SHORT_PROMPT + out / 2) };
  const perSeqS = Math.max(0, fit.b - perTokenS * (SHORT_PROMPT + out / 2));
  const baseStepS = Math.max(0, fit.a);
  // prefill(L) = base + perSeq + (perToken + prefillPerToken)·L.
  const pf = linearFit(
    prefill.map((p) => p.promptTokens),
    prefill.map((p) => p.seconds),
  );
  return {
    profile: {
      slots: best.concurrency,
      speed: 1,
      baseStepS,
      perSeqS,
      perTokenS,
      prefillPerTokenS: Math.max(0, pf.b - perTokenS),
    },
    maxUsefulConcurrency: best.concurrency,
    prefill,
    decode,
    requests,
    wallS: (performance.now() - t0) / 1000,
  };
}

/** One backend's profile derived from a captured trace. */
export interface TraceBackendProfile {
  readonly requests: number;
  readonly profile: MeasuredConstants;
  /** Most requests seen in flight at once on it. */
  readonly maxConcurrency: number;
}

interface Obs {
  readonly startS: number;
  readonly firstS: number;
  readonly endS: number;
  readonly promptTokens: number;
  readonly outputTokens: number;
}

/**
 * Per-backend profiles from an llmlb capture (`trace: { file }` in serve's config): successful
 * lines with a backend, a TTFT and an E2E. TTFT = base + (perToken + prefill)·prompt fits prefill;
 * a request's mean decode step (E2E − TTFT)/(output − 1) against the mean number of requests on
 * the same backend during its decode fits base and per-sequence cost. perTokenS is not separable
 * from a trace and is left out. Bad JSON → Error naming the line.
 */
export async function profilesFromTrace(path: string): Promise<Map<string, TraceBackendProfile>> {
  const by = new Map<string, Obs[]>();
  const lines = createInterface({ input: createReadStream(path), crlfDelay: Infinity });
  let no = 0;
  for await (const raw of lines) {
    no++;
    const line = raw.trim();
    if (line === '') continue;
    let v: Record<string, unknown>;
    try {
      v = JSON.parse(line) as Record<string, unknown>;
    } catch {
      throw new Error(`${path}:${no}: not JSON`);
    }
    const { backend, at, ttftS, e2eS, promptTokens, outputTokens, status } = v;
    if (
      typeof backend !== 'string' ||
      typeof at !== 'number' ||
      typeof ttftS !== 'number' ||
      typeof e2eS !== 'number' ||
      typeof promptTokens !== 'number' ||
      typeof outputTokens !== 'number' ||
      (status !== undefined && status !== 200)
    )
      continue;
    let list = by.get(backend);
    if (!list) by.set(backend, (list = []));
    list.push({ startS: at, firstS: at + ttftS, endS: at + e2eS, promptTokens, outputTokens });
  }
  const out = new Map<string, TraceBackendProfile>();
  for (const [name, obs] of by) {
    const pf = linearFit(
      obs.map((o) => o.promptTokens),
      obs.map((o) => o.firstS - o.startS),
    );
    // Requests on this backend in flight at time t: starts ≤ t minus ends ≤ t (binary search).
    const starts = obs.map((o) => o.startS).sort((a, b) => a - b);
    const ends = obs.map((o) => o.endS).sort((a, b) => a - b);
    const upTo = (xs: readonly number[], t: number): number => {
      let lo = 0;
      let hi = xs.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (xs[mid]! <= t) lo = mid + 1;
        else hi = mid;
      }
      return lo;
    };
    const inFlight = (t: number): number => upTo(starts, t) - upTo(ends, t);
    const xs: number[] = [];
    const ys: number[] = [];
    let maxConcurrency = 1;
    for (const o of obs) {
      maxConcurrency = Math.max(maxConcurrency, inFlight(o.startS));
      if (o.outputTokens < 2 || !(o.endS > o.firstS)) continue;
      // Mean concurrency over its decode, sampled at 5 points.
      let c = 0;
      for (let k = 0; k < 5; k++) c += inFlight(o.firstS + ((k + 0.5) / 5) * (o.endS - o.firstS));
      xs.push(c / 5);
      ys.push((o.endS - o.firstS) / (o.outputTokens - 1));
    }
    const step = linearFit(xs, ys);
    const baseStepS = Math.max(0, step.a);
    const perSeqS = Math.max(0, step.b);
    out.set(name, {
      requests: obs.length,
      maxConcurrency,
      profile: {
        slots: maxConcurrency,
        speed: 1,
        baseStepS,
        perSeqS,
        perTokenS: 0,
        prefillPerTokenS: Math.max(0, pf.b),
      },
    });
  }
  return out;
}

/** Why a request never got an answer, in words: `connection refused`, `host not found`, …. */
export function unreachableReason(err: unknown): string {
  const e = err as { name?: string; code?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return 'no answer (timed out)';
  const code = e?.cause?.code ?? e?.code;
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host not found';
    case 'ECONNRESET':
    case 'UND_ERR_SOCKET':
      return 'connection closed by the server';
    case 'ETIMEDOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'connection timed out';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable';
    default:
      return e?.cause?.message ?? (err as Error)?.message ?? String(err);
  }
}

const API_NAME: Record<ProbeApi, string> = { ollama: 'Ollama', openai: 'OpenAI' };
const MODELS_PATH: Record<ProbeApi, string> = { ollama: '/api/tags', openai: '/v1/models' };

/** The backend's model list over `api`: the names, or the HTTP status when it has no such route. */
async function listModels(
  backend: string,
  api: ProbeApi,
  timeoutMs: number,
): Promise<{ models: string[] } | { status: number }> {
  let res: Response;
  try {
    res = await fetch(new URL(MODELS_PATH[api], backend), { signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    throw new CommandError(`cannot reach ${backend}: ${unreachableReason(err)}`);
  }
  let body: unknown;
  try {
    body = res.ok ? await res.json() : (await res.arrayBuffer(), undefined);
  } catch {
    return { status: res.status === 200 ? 502 : res.status }; // not JSON: not this API
  }
  if (!res.ok) return { status: res.status };
  const b = body as { models?: { name?: unknown }[]; data?: { id?: unknown }[] };
  const names = api === 'ollama' ? b?.models?.map((m) => m?.name) : b?.data?.map((m) => m?.id);
  if (!Array.isArray(names)) return { status: 502 };
  return { models: names.filter((n): n is string => typeof n === 'string') };
}

/**
 * Before probing: the backend answers, over the API given, and has the model. Otherwise a
 * CommandError of one line: why it cannot be reached, the other API when that is the one it
 * answers (`try --api openai`), or the models it has.
 */
export async function checkBackend(
  backend: string,
  model: string,
  api: ProbeApi,
  timeoutMs = 10_000,
): Promise<void> {
  const got = await listModels(backend, api, timeoutMs);
  if ('status' in got) {
    const other: ProbeApi = api === 'ollama' ? 'openai' : 'ollama';
    const alt = await listModels(backend, other, timeoutMs).catch(() => undefined);
    if (alt && 'models' in alt)
      throw new CommandError(
        `${backend} does not answer the ${API_NAME[api]} API (GET ${MODELS_PATH[api]}: ${got.status}); ` +
          `the server answers the ${API_NAME[other]} API; try --api ${other}`,
      );
    throw new CommandError(
      `${backend} does not answer the ${API_NAME[api]} API (GET ${MODELS_PATH[api]}: ${got.status})`,
    );
  }
  // Ollama lists `llama3:latest` for `llama3`.
  if (got.models.some((m) => m === model || m === `${model}:latest`)) return;
  throw new CommandError(
    `model '${model}' not found on ${backend}; it has: ${got.models.length > 0 ? got.models.join(', ') : '(no models)'}`,
  );
}

export interface ProfileCommandOptions {
  readonly backend?: string | undefined;
  readonly model?: string | undefined;
  readonly trace?: string | undefined;
  readonly api?: string | undefined;
  readonly out?: string | undefined;
  readonly timeScale?: number | undefined;
  readonly quiet?: boolean;
}

const g4 = (x: number): string => Number(x.toPrecision(4)).toString();

function describe(p: MeasuredConstants): string {
  return (
    `slots ${p.slots}, base step ${g4(p.baseStepS * 1000)} ms, per sequence ${g4(p.perSeqS * 1e6)} µs, ` +
    `per context token ${g4(p.perTokenS * 1e9)} ns, prefill ${g4(p.prefillPerTokenS * 1e6)} µs/token`
  );
}

/** Rounded to 4 significant digits for the file. */
function rounded(p: MeasuredConstants): MeasuredConstants {
  const r = (x: number): number => Number(x.toPrecision(4));
  return {
    slots: p.slots,
    speed: 1,
    baseStepS: r(p.baseStepS),
    perSeqS: r(p.perSeqS),
    perTokenS: r(p.perTokenS),
    prefillPerTokenS: r(p.prefillPerTokenS),
  };
}

/** `llmlb profile`: probe a backend or read a capture, print the constants, write the profile file. */
export async function runProfileCommand(o: ProfileCommandOptions): Promise<void> {
  const outPath = o.out ?? 'profile.yaml';
  const say = (s: string): void => {
    if (!o.quiet) process.stdout.write(`${s}\n`);
  };
  if (o.trace !== undefined) {
    if (o.backend !== undefined) throw new UsageError('give --backend or --trace, not both');
    let per;
    try {
      per = await profilesFromTrace(o.trace);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT')
        throw new UsageError(`trace file not found: ${o.trace}`);
      throw new UsageError((e as Error).message);
    }
    if (per.size === 0)
      throw new UsageError(`${o.trace}: no successful request with a backend, TTFT and E2E`);
    // The fleet-wide profile whatif reads: the backends' median constants.
    const med = (f: (p: MeasuredConstants) => number): number => {
      const xs = [...per.values()].map((b) => f(b.profile)).sort((a, b) => a - b);
      return xs[Math.floor(xs.length / 2)]!;
    };
    const fleet: MeasuredConstants = {
      slots: med((p) => p.slots),
      speed: 1,
      baseStepS: med((p) => p.baseStepS),
      perSeqS: med((p) => p.perSeqS),
      perTokenS: 0,
      prefillPerTokenS: med((p) => p.prefillPerTokenS),
    };
    for (const [name, b] of per) say(`${name} (${b.requests} requests): ${describe(b.profile)}`);
    const doc = {
      profile: rounded(fleet),
      source: { trace: o.trace, note: 'median over backends; per-backend constants below' },
      backends: Object.fromEntries(
        [...per].map(([name, b]) => [name, { requests: b.requests, ...rounded(b.profile) }]),
      ),
    };
    writeFileSync(outPath, stringify(doc));
    say(`wrote ${outPath}`);
    return;
  }
  if (o.backend === undefined || o.model === undefined)
    throw new UsageError('llmlb profile needs --backend URL and --model M (or --trace FILE)');
  const api = o.api ?? 'ollama';
  if (api !== 'ollama' && api !== 'openai')
    throw new UsageError(`--api must be ollama or openai, got '${api}'`);
  try {
    new URL(o.backend);
  } catch {
    throw new UsageError(`--backend: not a URL: ${o.backend}`);
  }
  await checkBackend(o.backend, o.model, api);
  say(`probing ${o.backend} (${api}, model ${o.model}): about 20 requests`);
  let r: ProbeResult;
  try {
    r = await probeBackend({
      backend: o.backend,
      model: o.model,
      api,
      ...(o.timeScale !== undefined ? { timeScale: o.timeScale } : {}),
    });
  } catch (err) {
    // Mid-probe: the server went away or answered an error (its message names the route and status).
    const e = err as Error;
    throw new CommandError(
      e.name === 'TypeError' || e.name === 'TimeoutError'
        ? `cannot reach ${o.backend}: ${unreachableReason(err)}`
        : e.message.replace(/\s*\n\s*/g, ' '),
    );
  }
  for (const p of r.prefill) say(`  prefill ${p.promptTokens} tokens: ${g4(p.seconds)} s`);
  for (const d of r.decode)
    say(`  decode x${d.concurrency}: step ${g4(d.stepS * 1000)} ms, ${g4(d.tokensPerS)} tokens/s`);
  say(`${describe(r.profile)} (${r.requests} requests, ${r.wallS.toFixed(1)} s)`);
  const doc = {
    profile: rounded(r.profile),
    source: {
      backend: o.backend,
      model: o.model,
      api,
      maxUsefulConcurrency: r.maxUsefulConcurrency,
      prefill: r.prefill,
      decode: r.decode,
    },
  };
  writeFileSync(outPath, stringify(doc));
  say(`wrote ${outPath}`);
}
