/**
 * Token counts for OpenAI-API streams whose client did not ask for usage — the default of the
 * openai SDKs, LangChain and aiperf. The router asks the backend for it
 * (`stream_options.include_usage`), reads the extra usage-only event at the end of the stream and
 * drops it, so the client gets the bytes a direct connection would have given it. Where a backend
 * gives no usage (`streamUsage: false`, or an older server ignoring the option), the stream's
 * content events are counted instead: one per token on vLLM, SGLang, llama.cpp and Ollama.
 */
import type { Usage } from './usage.js';

const INCLUDE_USAGE = '"stream_options":{"include_usage":true}';

/**
 * The request body with `stream_options.include_usage` set, or undefined when it need not (or
 * cannot) change: the client asked for usage itself, or its `stream_options` is not an object.
 * A body without `stream_options` — nearly all of them — is spliced, not re-serialised.
 */
export function withUsageRequested(raw: Buffer, body: Readonly<Record<string, unknown>>): Buffer | undefined {
  if (!Object.hasOwn(body, 'stream_options')) {
    let i = 0;
    while (i < raw.length && raw[i] !== 123) i++; // '{' (after any BOM or whitespace)
    if (i === raw.length) return undefined;
    let j = i + 1;
    while (j < raw.length && isSpace(raw[j])) j++;
    const sep = raw[j] === 125 ? '' : ','; // '{}' takes no comma
    return Buffer.concat([raw.subarray(0, i + 1), Buffer.from(INCLUDE_USAGE + sep), raw.subarray(i + 1)]);
  }
  const so = body.stream_options;
  if (so === null) return Buffer.from(JSON.stringify({ ...body, stream_options: { include_usage: true } }));
  if (typeof so !== 'object' || Array.isArray(so)) return undefined; // the backend answers it with its 400
  if ((so as Record<string, unknown>).include_usage === true) return undefined;
  return Buffer.from(JSON.stringify({ ...body, stream_options: { ...so, include_usage: true } }));
}

const isSpace = (c: number | undefined): boolean => c === 32 || c === 10 || c === 13 || c === 9;

/** A partial event longer than this is not an SSE event worth holding: the scanner stands aside. */
const MAX_HELD_BYTES = 1 << 20;

const USAGE_KEY = Buffer.from('"usage"');
const DONE = Buffer.from('[DONE]');
// Where a token's text starts in a chat/completions chunk: content (and reasoning_content), text,
// tool-call arguments. A key followed by an empty string carries no token.
const TOKEN_KEYS = [Buffer.from('content":"'), Buffer.from('"text":"'), Buffer.from('"arguments":"')];

/**
 * Reads an OpenAI-API SSE stream as it is forwarded: counts its token-carrying events, keeps the
 * usage it reports, and — when the router asked for that usage on the client's behalf — holds each
 * event until it is complete so the usage-only one can be dropped. Events are split on blank lines
 * (LF or CRLF), whatever the chunking.
 */
export class SseUsageScanner {
  /** Events that carried token text: the completion's length when no usage came. */
  contentEvents = 0;
  /** The usage the stream reported, if it did. */
  usage: Usage | undefined;
  private held: Buffer | undefined;
  private gaveUp = false;

  /** `drop`: the client did not ask for usage; the usage-only event must not reach it. */
  constructor(private readonly drop: boolean) {}

  /** Reads a chunk; returns the bytes to forward now (the chunk itself unless dropping). */
  push(chunk: Buffer): Buffer {
    if (this.gaveUp) return chunk;
    const buf = this.held === undefined ? chunk : Buffer.concat([this.held, chunk]);
    this.held = undefined;
    let start = 0;
    let kept: Buffer[] | undefined; // forwarded pieces, only once an event was dropped
    let keptFrom = 0;
    for (;;) {
      const end = eventEnd(buf, start);
      if (end < 0) break;
      if (this.event(buf, start, end) && this.drop) {
        (kept ??= []).push(buf.subarray(keptFrom, start));
        keptFrom = end;
      }
      start = end;
    }
    if (start < buf.length) {
      if (buf.length - start > MAX_HELD_BYTES) {
        this.gaveUp = true; // not an event stream we understand: forward everything from here on
        start = buf.length;
      } else this.held = Buffer.from(buf.subarray(start)); // a copy: the chunk's memory is undici's
    }
    if (!this.drop) return chunk;
    if (kept === undefined) return keptFrom === 0 && start === buf.length ? buf : buf.subarray(0, start);
    kept.push(buf.subarray(keptFrom, start));
    return Buffer.concat(kept);
  }

  /** The stream ended: whatever is still held goes out (a last event without its blank line). */
  end(): Buffer {
    const rest = this.held;
    this.held = undefined;
    if (rest === undefined) return Buffer.alloc(0);
    if (this.gaveUp) return this.drop ? rest : Buffer.alloc(0);
    const drop = this.event(rest, 0, rest.length);
    return this.drop && !drop ? rest : Buffer.alloc(0);
  }

  /** One complete event in buf[s, e): counts it; true when it is a usage-only event. */
  private event(buf: Buffer, s: number, e: number): boolean {
    const u = buf.indexOf(USAGE_KEY, s);
    if (u >= 0 && u < e) {
      const o = parsePayload(buf, s, e);
      const usage = o === undefined ? undefined : usageOf(o.usage);
      if (usage !== undefined) {
        this.usage = usage;
        if (Array.isArray(o!.choices) && o!.choices.length === 0) return true;
      }
    }
    for (const k of TOKEN_KEYS) {
      const at = buf.indexOf(k, s);
      if (at >= 0 && at + k.length < e && buf[at + k.length] !== 34) {
        this.contentEvents++;
        break;
      }
    }
    return false;
  }
}

/** The index just past the blank line ending the event that starts at `from`, or -1. */
function eventEnd(buf: Buffer, from: number): number {
  for (let i = buf.indexOf(10, from); i >= 0; i = buf.indexOf(10, i + 1)) {
    const n = buf[i + 1];
    if (n === 10) return i + 2;
    if (n === 13 && buf[i + 2] === 10) return i + 3;
  }
  return -1;
}

/** The JSON object of an event's `data:` line(s), or undefined. */
function parsePayload(buf: Buffer, s: number, e: number): Record<string, unknown> | undefined {
  const text = buf.toString('utf8', s, e);
  let data = '';
  for (const line of text.split(/\r?\n/))
    if (line.startsWith('data:')) data += (data === '' ? '' : '\n') + line.slice(5).trim();
  if (data === '' || data === DONE.toString()) return undefined;
  try {
    const v: unknown = JSON.parse(data);
    return v !== null && typeof v === 'object' && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

const count = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;

function usageOf(u: unknown): Usage | undefined {
  if (u === null || typeof u !== 'object') return undefined;
  const r = u as Record<string, unknown>;
  const completionTokens = count(r.completion_tokens);
  if (completionTokens === undefined) return undefined;
  return { promptTokens: count(r.prompt_tokens), completionTokens };
}
