/**
 * Probing a live engine for its profile (`llmlb profile --backend URL --model M`): a short,
 * bounded probe (about 20 requests) — prefill seconds per token from prompts of growing length
 * (one output token each); the decode step's cost per context token from a long and a short
 * prompt decoding alone; its base and per-sequence cost from 1, 2, 4, 8 concurrent decodes; the
 * most useful concurrency, where throughput stops growing (the engine's slots, as far as routing
 * is concerned). Ollama reports prefill and decode durations itself; over the OpenAI API they are
 * timed from the stream. Before probing, `checkBackend` says in one line why a backend cannot be
 * probed. The fit is src/engine/profile-fit.ts's; written with speed 1: the constants are absolute.
 */
import { performance } from 'node:perf_hooks';
import { createRng } from '../core/rng.js';
import { linearFit, type MeasuredConstants } from '../engine/profile-fit.js';
import { OUTPUT_TOKENS_HEADER } from '../engine/server.js';

/** A backend that cannot be probed (unreachable, another API, no such model): one line saying why. */
export class BackendCheckError extends Error {
  override readonly name = 'BackendCheckError';
}

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
    throw new BackendCheckError(`cannot reach ${backend}: ${unreachableReason(err)}`);
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
 * BackendCheckError of one line: why it cannot be reached, the other API when that is the one it
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
      throw new BackendCheckError(
        `${backend} does not answer the ${API_NAME[api]} API (GET ${MODELS_PATH[api]}: ${got.status}); ` +
          `the server answers the ${API_NAME[other]} API; try --api ${other}`,
      );
    throw new BackendCheckError(
      `${backend} does not answer the ${API_NAME[api]} API (GET ${MODELS_PATH[api]}: ${got.status})`,
    );
  }
  // Ollama lists `llama3:latest` for `llama3`.
  if (got.models.some((m) => m === model || m === `${model}:latest`)) return;
  throw new BackendCheckError(
    `model '${model}' not found on ${backend}; it has: ${got.models.length > 0 ? got.models.join(', ') : '(no models)'}`,
  );
}
