/**
 * Token counts and engine timings from a response, read once at its end from the last bytes we
 * forwarded — so the per-chunk path only keeps a bounded tail, and never parses mid-stream.
 */
import type { UsageFormat } from '../api/endpoints.js';

export interface Usage {
  promptTokens?: number | undefined;
  completionTokens?: number | undefined;
  /** Engine-measured prefill time, ms (Ollama prompt_eval_duration). */
  promptEvalMs?: number | undefined;
  /** Engine-measured decode time, ms (Ollama eval_duration). */
  evalMs?: number | undefined;
  /** Prompt tokens the engine found in its prefix cache (usage.prompt_tokens_details.cached_tokens). */
  cachedTokens?: number | undefined;
}

/** Keeps the last `limit` bytes (at least the last whole chunk) of a response. */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.chunks.length > 1 && this.size - this.chunks[0]!.length >= this.limit) {
      this.size -= this.chunks.shift()!.length;
    }
  }

  /** The kept bytes as text, or only the last `maxBytes` of them. */
  text(maxBytes = Infinity): string {
    const b = this.lastBytes(maxBytes);
    return b.toString('utf8', b.length > maxBytes ? b.length - maxBytes : 0);
  }

  get bytes(): number {
    return this.size;
  }

  /** At least the last `n` kept bytes (the last chunk alone when it is long enough: no copy). */
  lastBytes(n: number): Buffer {
    const c = this.chunks;
    if (c.length === 0) return Buffer.alloc(0);
    if (c.length === 1 || c[c.length - 1]!.length >= n) return c[c.length - 1]!;
    let i = c.length;
    let size = 0;
    while (i > 0 && size < n) size += c[--i]!.length;
    return Buffer.concat(c.slice(i)); // only the chunks counted, copied once
  }
}

/** Ollama's counts close its final object: they are looked for in this many last bytes. */
const OLLAMA_WINDOW = 512;

const KEY_PROMPT_EVAL_COUNT = Buffer.from('"prompt_eval_count"');
const KEY_PROMPT_EVAL_DURATION = Buffer.from('"prompt_eval_duration"');
const KEY_EVAL_COUNT = Buffer.from('"eval_count"');
const KEY_EVAL_DURATION = Buffer.from('"eval_duration"');

export const isSpace = (c: number | undefined): boolean => c === 32 || c === 10 || c === 13 || c === 9;

/**
 * A `"key": number` in the last line of `b`, read from the bytes (nothing decoded). In valid JSON
 * an unescaped `"key"` after `{` or `,` and before `:` can only be a key, so text inside the
 * answer cannot match.
 */
function byteNumberField(b: Buffer, key: Buffer, lineStart: number): number | undefined {
  const at = b.lastIndexOf(key);
  if (at < lineStart) return undefined;
  let p = at - 1;
  while (p >= lineStart && isSpace(b[p])) p--;
  if (p < lineStart || (b[p] !== 123 && b[p] !== 44)) return undefined; // '{' or ','
  let i = at + key.length;
  while (isSpace(b[i])) i++;
  if (b[i] !== 58) return undefined; // ':'
  i++;
  while (isSpace(b[i])) i++;
  const start = i;
  for (
    let c = b[i];
    c !== undefined && ((c >= 48 && c <= 57) || c === 45 || c === 46 || c === 43 || c === 101 || c === 69);
    c = b[++i]
  );
  if (i === start) return undefined;
  let e = i;
  while (isSpace(b[e])) e++;
  if (b[e] !== 44 && b[e] !== 125) return undefined; // ',' or '}'
  return num(Number(b.toString('latin1', start, i)));
}

/** Ollama's counts from the raw end of a response; undefined when its last line does not hold them. */
function ollamaCountsInBytes(b: Buffer): Usage | undefined {
  let end = b.length - 1;
  while (end >= 0 && isSpace(b[end])) end--;
  if (end < 0 || b[end] !== 125) return undefined; // the final object must be complete
  const lineStart = b.lastIndexOf(10, end) + 1;
  const completionTokens = byteNumberField(b, KEY_EVAL_COUNT, lineStart);
  if (completionTokens === undefined) return undefined;
  const ped = byteNumberField(b, KEY_PROMPT_EVAL_DURATION, lineStart);
  const ed = byteNumberField(b, KEY_EVAL_DURATION, lineStart);
  return {
    promptTokens: byteNumberField(b, KEY_PROMPT_EVAL_COUNT, lineStart),
    completionTokens,
    promptEvalMs: ped === undefined ? undefined : ped / 1e6,
    evalMs: ed === undefined ? undefined : ed / 1e6,
  };
}

/** Bytes at the end of a response where Ollama and OpenAI servers put their counts. */
const USAGE_WINDOW = 4096;

/**
 * Usage from the end of a forwarded response: the last few KB first (a long non-streamed answer
 * is not decoded and parsed whole), all that was kept only when the counts were not there.
 */
export function responseUsage(tail: TailBuffer, api: UsageFormat, stream: boolean, head?: Buffer): Usage {
  if (api === 'anthropic') {
    const read = (text: string): Usage => anthropicUsage(text, stream, head?.toString('utf8'));
    const u = read(tail.text(USAGE_WINDOW));
    return u.completionTokens !== undefined || tail.bytes <= USAGE_WINDOW ? u : read(tail.text());
  }
  if (api === 'ollama') {
    const fast = ollamaCountsInBytes(tail.lastBytes(OLLAMA_WINDOW));
    if (fast) return fast;
  }
  const read = (text: string): Usage =>
    api === 'ollama'
      ? ollamaUsage(text)
      : api === 'openai-responses'
        ? responsesUsage(text)
        : openaiUsage(text, stream);
  const u = read(tail.text(USAGE_WINDOW));
  return u.completionTokens !== undefined || tail.bytes <= USAGE_WINDOW ? u : read(tail.text());
}

const num = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;

function parseObject(s: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(s);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Ollama: the final object (the whole body, or the last NDJSON line) carries counts and ns durations. */
export function ollamaUsage(tail: string): Usage {
  const end = tail.trimEnd();
  const start = end.lastIndexOf('\n') + 1;
  const line = start === 0 ? end : end.slice(start);
  const o = parseObject(line);
  if (!o) return {};
  const ped = num(o.prompt_eval_duration);
  const ed = num(o.eval_duration);
  return {
    promptTokens: num(o.prompt_eval_count),
    completionTokens: num(o.eval_count),
    promptEvalMs: ped === undefined ? undefined : ped / 1e6,
    evalMs: ed === undefined ? undefined : ed / 1e6,
  };
}

/** The token counts of an OpenAI object's `usage` (a body, a stream event); undefined without one. */
export function usageOf(o: Record<string, unknown> | undefined): Usage | undefined {
  const u = o?.usage;
  if (!u || typeof u !== 'object') return undefined;
  const r = u as Record<string, unknown>;
  // vLLM, SGLang and OpenAI: usage.prompt_tokens_details.cached_tokens; llama.cpp's server:
  // timings.cache_n beside the usage.
  const details = r.prompt_tokens_details;
  const timings = o?.timings;
  const cached =
    details && typeof details === 'object'
      ? num((details as Record<string, unknown>).cached_tokens)
      : timings && typeof timings === 'object'
        ? num((timings as Record<string, unknown>).cache_n)
        : undefined;
  return {
    promptTokens: num(r.prompt_tokens),
    completionTokens: num(r.completion_tokens),
    ...(cached !== undefined ? { cachedTokens: cached } : {}),
  };
}

/** The body's last `"usage": {…}` object, parsed alone (servers put it after the choices). */
function usageObject(s: string): Usage | undefined {
  const at = s.lastIndexOf('"usage":');
  return at <= 0 ? undefined : usageObjectAt(s, at, usageOf);
}

/** The `"usage": {…}` object at `at`, parsed alone and read by `read`. */
function usageObjectAt(
  s: string,
  at: number,
  read: (o: Record<string, unknown>) => Usage | undefined,
): Usage | undefined {
  const open = s.indexOf('{', at + 8);
  if (open < 0 || s.slice(at + 8, open).trim() !== '') return undefined;
  let depth = 0;
  for (let i = open; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 34) {
      // skip a string (keys, and any braces inside one)
      for (i++; i < s.length; i++) {
        const d = s.charCodeAt(i);
        if (d === 92) i++;
        else if (d === 34) break;
      }
    } else if (c === 123) depth++;
    else if (c === 125 && --depth === 0) return read({ usage: parseObject(s.slice(open, i + 1)) });
  }
  return undefined;
}

/** OpenAI: `usage` in the JSON body, or in the last SSE events (stream_options.include_usage). */
export function openaiUsage(tail: string, stream: boolean): Usage {
  if (!stream) return usageObject(tail) ?? usageOf(parseObject(tail)) ?? {};
  // Walk SSE events backwards; the usage chunk is the last data event before [DONE].
  const events = tail.split('\n\n');
  for (let i = events.length - 1; i >= 0; i--) {
    const line = events[i]!.trim();
    if (!line.startsWith('data:')) continue;
    const payload = line.slice(5).trim();
    if (payload === '[DONE]') continue;
    const u = usageOf(parseObject(payload));
    if (u) return u;
  }
  return {};
}

/** Anthropic usage (`input_tokens`, `output_tokens`, `cache_read_input_tokens`) as counts. */
function anthropicCounts(o: Record<string, unknown> | undefined): Usage | undefined {
  const u = o?.usage;
  if (!u || typeof u !== 'object') return undefined;
  const r = u as Record<string, unknown>;
  const cached = num(r.cache_read_input_tokens);
  return {
    promptTokens: num(r.input_tokens),
    completionTokens: num(r.output_tokens),
    ...(cached !== undefined ? { cachedTokens: cached } : {}),
  };
}

/**
 * Anthropic Messages: `usage` in the body; in a stream, `message_delta`'s usage near the end
 * (output tokens, and input tokens on newer servers) with message_start's input tokens (`head`,
 * the stream's first bytes) where message_delta does not say.
 */
export function anthropicUsage(tail: string, stream: boolean, head?: string): Usage {
  if (!stream) {
    const at = tail.lastIndexOf('"usage":');
    return (
      (at > 0 ? usageObjectAt(tail, at, anthropicCounts) : undefined) ??
      anthropicCounts(parseObject(tail)) ??
      {}
    );
  }
  let found: Usage | undefined;
  const events = tail.split('\n\n');
  for (let i = events.length - 1; i >= 0 && found === undefined; i--) {
    const e = events[i]!;
    if (!e.includes('message_delta')) continue;
    const at = e.indexOf('data:');
    if (at >= 0) found = anthropicCounts(parseObject(e.slice(at + 5).trim()));
  }
  if (found === undefined) return {};
  if (found.promptTokens === undefined && head !== undefined) {
    const at = head.indexOf('"usage":');
    const start = at > 0 ? usageObjectAt(head, at, anthropicCounts) : undefined;
    if (start !== undefined)
      found = {
        ...found,
        promptTokens: start.promptTokens,
        ...(start.cachedTokens !== undefined ? { cachedTokens: start.cachedTokens } : {}),
      };
  }
  return found;
}

/** Responses API usage (`input_tokens`, `output_tokens`, `input_tokens_details.cached_tokens`) as counts. */
function responsesCounts(o: Record<string, unknown> | undefined): Usage | undefined {
  const u = o?.usage;
  if (!u || typeof u !== 'object') return undefined;
  const r = u as Record<string, unknown>;
  const details = r.input_tokens_details;
  const cached =
    details && typeof details === 'object'
      ? num((details as Record<string, unknown>).cached_tokens)
      : undefined;
  return {
    promptTokens: num(r.input_tokens),
    completionTokens: num(r.output_tokens),
    ...(cached !== undefined ? { cachedTokens: cached } : {}),
  };
}

/**
 * OpenAI Responses API: the Response object's `usage` — the body's, or in a stream the closing
 * event's (`response.completed` / `response.incomplete`: `{"type":…,"response":{…,"usage":{…}}}`).
 * The last `"usage": {…}` of the tail is that one: the opening events carry `"usage":null`, and
 * answer text cannot hold an unescaped `"usage":`.
 */
export function responsesUsage(tail: string): Usage {
  const at = tail.lastIndexOf('"usage":');
  return (at > 0 ? usageObjectAt(tail, at, responsesCounts) : undefined) ?? {};
}
