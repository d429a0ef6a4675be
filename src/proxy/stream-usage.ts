/**
 * Token counts for OpenAI-API streams whose client did not ask for usage — the default of the
 * openai SDKs, LangChain and aiperf. The router asks the backend for it
 * (`stream_options.include_usage`), reads the extra usage-only event at the end of the stream and
 * drops it, so the client gets the bytes a direct connection would have given it. Where a backend
 * gives no usage (`streamUsage: false`, or an older server ignoring the option), the stream's
 * content events are counted instead: one per token on vLLM, SGLang, llama.cpp and Ollama.
 */
import { sseEventObject } from '../api/sse.js';
import { isSpace, usageOf, type Usage } from './usage.js';

const INCLUDE_USAGE = '"stream_options":{"include_usage":true}';

/** How one OpenAI stream's tokens are counted: the body to send instead, and how to scan the answer. */
export interface UsagePlan {
  /** The body with `stream_options.include_usage` set; undefined: forward the client's. */
  readonly body?: Buffer | undefined;
  /** drop: the router asked, the usage-only event is dropped; count: count token events; none: usage comes. */
  readonly scan: 'drop' | 'count' | 'none';
}

const CLIENT_ASKED: UsagePlan = { scan: 'none' };
const COUNT: UsagePlan = { scan: 'count' };

/**
 * The plan for one stream: a client that asked for usage gets it and needs nothing; otherwise the
 * backend is asked for it (`streamUsage` not false) — the body spliced, not re-serialised, in the
 * usual case of a body without `stream_options` — or its token events are counted.
 */
export function usagePlan(
  raw: Buffer,
  body: Readonly<Record<string, unknown>>,
  backendGivesUsage: boolean,
): UsagePlan {
  if (!Object.hasOwn(body, 'stream_options')) {
    if (!backendGivesUsage) return COUNT;
    let i = 0;
    while (i < raw.length && raw[i] !== 123) i++; // '{' (after any BOM or whitespace)
    if (i === raw.length) return COUNT;
    let j = i + 1;
    while (j < raw.length && isSpace(raw[j])) j++;
    const sep = raw[j] === 125 ? '' : ','; // '{}' takes no comma
    const spliced = Buffer.concat([
      raw.subarray(0, i + 1),
      Buffer.from(INCLUDE_USAGE + sep),
      raw.subarray(i + 1),
    ]);
    return { body: spliced, scan: 'drop' };
  }
  const so = body.stream_options;
  if (so !== null && (typeof so !== 'object' || Array.isArray(so))) return COUNT; // the backend answers it (400)
  const given = (so ?? {}) as Record<string, unknown>;
  if (given.include_usage === true) return CLIENT_ASKED;
  // continuous_usage_stats would put usage in every event the client sees once usage is on.
  if (!backendGivesUsage || given.continuous_usage_stats === true) return COUNT;
  const options = { ...given, include_usage: true };
  return { body: Buffer.from(JSON.stringify({ ...body, stream_options: options })), scan: 'drop' };
}

/** A partial event longer than this is not an SSE event worth holding: the scanner stands aside. */
const MAX_HELD_BYTES = 1 << 20;

const USAGE_KEY = Buffer.from('"usage"');
// Where a token's text starts in a chat/completions chunk: content (and reasoning_content), text,
// tool-call arguments. A key followed by an empty string carries no token.
const [CONTENT, REASONING, TEXT, ARGUMENTS] = [
  '"content":"',
  '"reasoning_content":"',
  '"text":"',
  '"arguments":"',
].map((k) => Buffer.from(k)) as [Buffer, Buffer, Buffer, Buffer];

/**
 * Reads an OpenAI-API SSE stream as it is forwarded: counts its token-carrying events, keeps the
 * usage it reports, and — when the router asked for that usage on the client's behalf — holds each
 * event until it is complete so the usage-only one can be dropped. Events are split on blank lines
 * (LF or CRLF), whatever the chunking. One pass over the bytes, stopping only at quotes and line
 * feeds (a string's own quotes are escaped, so keys cannot be faked by text); only a usage event
 * is decoded and parsed.
 */
export class SseUsageScanner {
  /** Events that carried token text: the completion's length when no usage came. */
  contentEvents = 0;
  /** The usage the stream reported, if it did. */
  usage: Usage | undefined;
  /** The incomplete last event: read again whole, and when dropping, not yet forwarded. */
  private held: Buffer | undefined;
  private gaveUp = false;

  /** `drop`: the client did not ask for usage; the usage-only event must not reach it. */
  constructor(private readonly drop: boolean) {}

  /** Reads a chunk; returns the bytes to forward now (the chunk itself unless dropping). */
  push(chunk: Buffer): Buffer {
    if (this.gaveUp) return chunk;
    const held = this.held;
    const buf = held === undefined ? chunk : Buffer.concat([held, chunk]);
    this.held = undefined;
    const read = this.read(buf, false);
    const cut = read.cut;
    let complete = read.complete;
    if (buf.length - complete > MAX_HELD_BYTES) {
      this.gaveUp = true; // not an event stream we understand: forward everything from here on
      complete = buf.length;
    } else if (complete < buf.length) this.held = Buffer.from(buf.subarray(complete)); // undici reuses chunks
    if (!this.drop) return chunk;
    if (cut === undefined)
      return held === undefined && complete === buf.length ? chunk : buf.subarray(0, complete);
    return without(buf, complete, cut);
  }

  /** The stream ended: whatever is still held goes out (a last event without its blank line). */
  end(): Buffer {
    const rest = this.held;
    this.held = undefined;
    if (rest === undefined) return Buffer.alloc(0);
    const { cut } = this.read(rest, true);
    if (!this.drop) return Buffer.alloc(0);
    return cut === undefined ? rest : without(rest, rest.length, cut);
  }

  /**
   * Reads the complete events of buf (all of it when `final`): counts tokens, keeps usage.
   * Returns where the incomplete last event starts and the usage-only events' spans.
   */
  private read(buf: Buffer, final: boolean): { complete: number; cut: number[] | undefined } {
    const n = buf.length;
    let start = 0;
    let tokens = false;
    let usage = false;
    let cut: number[] | undefined;
    for (let i = 0; i < n; i++) {
      const c = buf[i]!;
      if (c === 34) {
        // A quote opening a key we want: checked by its first letters inline, whole only then.
        const d = buf[i + 1]!;
        if (d === 117) usage ||= buf[i + 2] === 115 && buf[i + 3] === 97 && startsWith(buf, i, USAGE_KEY);
        else if (!tokens && (d === 99 || d === 114 || d === 116 || d === 97)) tokens = tokenKey(buf, i, d);
        continue;
      }
      // An event ends at a blank line (LF LF or LF CR LF).
      if (c !== 10 || i === start) continue;
      const p = buf[i - 1]!;
      if (p !== 10 && (p !== 13 || i - 2 < start || buf[i - 2] !== 10)) continue;
      if (tokens) this.contentEvents++;
      if (usage && this.usageOnly(buf, start, i + 1)) (cut ??= []).push(start, i + 1);
      start = i + 1;
      tokens = false;
      usage = false;
    }
    // A final read ends the last event without its blank line.
    if (final && start < n) {
      if (tokens) this.contentEvents++;
      if (usage && this.usageOnly(buf, start, n)) (cut ??= []).push(start, n);
    }
    return { complete: final ? n : start, cut };
  }

  /** Keeps the usage of the event in buf[s, e); true when it is a usage-only event (no choices). */
  private usageOnly(buf: Buffer, s: number, e: number): boolean {
    const o = sseEventObject(buf.toString('utf8', s, e));
    const usage = usageOf(o);
    if (usage?.completionTokens === undefined) return false;
    this.usage = usage;
    return Array.isArray(o!.choices) && o!.choices.length === 0;
  }
}

function startsWith(buf: Buffer, at: number, key: Buffer): boolean {
  if (at + key.length > buf.length) return false;
  for (let j = 1; j < key.length; j++) if (buf[at + j] !== key[j]) return false;
  return true;
}

/** A token key at `at` (its first letter `d`), followed by a non-empty string. */
function tokenKey(buf: Buffer, at: number, d: number): boolean {
  const k = d === 99 ? CONTENT : d === 114 ? REASONING : d === 116 ? TEXT : ARGUMENTS;
  if (buf[at + 2] !== k[2] || buf[at + 3] !== k[3] || at + k.length >= buf.length || !startsWith(buf, at, k))
    return false;
  return buf[at + k.length] !== 34;
}

/** buf[0, end) without the spans [s0, e0), [s1, e1)… */
function without(buf: Buffer, end: number, cut: readonly number[]): Buffer {
  const parts: Buffer[] = [];
  let from = 0;
  for (let i = 0; i < cut.length; i += 2) {
    parts.push(buf.subarray(from, cut[i]));
    from = cut[i + 1]!;
  }
  parts.push(buf.subarray(from, end));
  return Buffer.concat(parts);
}
