/**
 * Token counts and engine timings from a response, read once at its end from the last bytes we
 * forwarded — so the per-chunk path only keeps a bounded tail, and never parses mid-stream.
 */

export interface Usage {
  promptTokens?: number | undefined;
  completionTokens?: number | undefined;
  /** Engine-measured prefill time, ms (Ollama prompt_eval_duration). */
  promptEvalMs?: number | undefined;
  /** Engine-measured decode time, ms (Ollama eval_duration). */
  evalMs?: number | undefined;
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

  text(): string {
    return this.chunks.length === 1
      ? this.chunks[0]!.toString('utf8')
      : Buffer.concat(this.chunks).toString('utf8');
  }
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
  const o = parseObject(end.slice(start));
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

function usageOf(o: Record<string, unknown> | undefined): Usage | undefined {
  const u = o?.usage;
  if (!u || typeof u !== 'object') return undefined;
  const r = u as Record<string, unknown>;
  return { promptTokens: num(r.prompt_tokens), completionTokens: num(r.completion_tokens) };
}

/** OpenAI: `usage` in the JSON body, or in the last SSE events (stream_options.include_usage). */
export function openaiUsage(tail: string, stream: boolean): Usage {
  if (!stream) return usageOf(parseObject(tail)) ?? {};
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
