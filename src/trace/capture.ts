/**
 * Trace capture (`trace: { file, maxBytes, keep }`): one JSONL line per request `serve` routed, in
 * the llmlb trace format (src/workloads/trace.ts), so `llmlb whatif --trace FILE` replays it. No
 * prompt text: lengths, the prompt's block hash chain (prefix sharing) and a hash of the session
 * key — text only when `log.prompts` is on.
 *
 * Off the hot path: record() serializes one line into a buffer; the buffer goes to disk in one
 * asynchronous write when it holds BATCH_BYTES or FLUSH_MS after its first line, one write in
 * flight at a time (as src/log.ts batches log lines). The file rotates by size: at maxBytes it
 * becomes FILE.1 (FILE.1 → FILE.2 …, keeping `keep` old files) and a new FILE starts.
 */
import { closeSync, existsSync, mkdirSync, openSync, renameSync, rmSync, statSync, write } from 'node:fs';
import { dirname } from 'node:path';
import { blockHashHex, promptBlockHashes } from '../engine/tokens.js';

export const BATCH_BYTES = 64 * 1024;
export const FLUSH_MS = 200;
/** Tokens per captured block: fine enough for prefix sharing, a short line for long prompts. */
export const CAPTURE_BLOCK_TOKENS = 64;

export interface CaptureOptions {
  readonly file: string;
  /** Rotate when the file would exceed this many bytes. */
  readonly maxBytes: number;
  /** Rotated files kept (FILE.1 … FILE.keep); 0 keeps none. */
  readonly keep: number;
  /** Also write prompt text (config `log.prompts: true`). */
  readonly prompts?: boolean;
  /** Time origin of `at`, ms since the epoch (default: when the capture starts). */
  readonly originMs?: number;
}

/** What the request path knows about a request when it ends. */
export interface CaptureEntry {
  /** When it reached the router, ms since the epoch. */
  readonly arrivalMs: number;
  readonly model: string;
  readonly api: 'ollama-generate' | 'ollama-chat' | 'openai-completions' | 'openai-chat';
  /** Prompt text flattened (the router's promptText); hashed into blocks, written only with prompts. */
  readonly promptText: string;
  /** Engine-reported prompt tokens; absent: counted from the text (4 chars a token). */
  readonly promptTokens?: number | undefined;
  /** Tokens generated (engine-reported); absent or 0 is written as 1 (the replay needs ≥ 1). */
  readonly outputTokens?: number | undefined;
  readonly maxTokens?: number | undefined;
  /** The affinity key as the client sent it: only its hash is written. */
  readonly sessionKey?: string | undefined;
  readonly backend?: string | undefined;
  /** Time to first byte and end to end, ms (from arrival). */
  readonly ttftMs?: number | undefined;
  readonly e2eMs: number;
  /** HTTP status answered to the client. */
  readonly status: number;
}

/** A stable 64-bit hash of a session key, hex (the key itself may identify a user). */
export function hashKey(key: string): string {
  let h1 = 0x811c9dc5;
  let h2 = 0x01000193 ^ key.length;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193);
    h2 = Math.imul(h2 ^ c, 0x5bd1e995) ^ (h2 >>> 15);
  }
  return (h1 >>> 0).toString(16).padStart(8, '0') + (h2 >>> 0).toString(16).padStart(8, '0');
}

const r3 = (x: number): number => Math.round(x * 1000) / 1000;

export class TraceCapture {
  private readonly originMs: number;
  private buf: string[] = [];
  private bufBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private writing = false;
  private fd: number;
  private size: number;
  private closed = false;
  private idle: (() => void)[] = [];
  /** Lines recorded and lines dropped because the disk fell behind (never blocks a request). */
  recorded = 0;
  dropped = 0;

  constructor(private readonly opts: CaptureOptions) {
    this.originMs = opts.originMs ?? Date.now();
    mkdirSync(dirname(opts.file), { recursive: true });
    this.fd = openSync(opts.file, 'a');
    this.size = statSync(opts.file).size;
  }

  /** Serialize one request; the write happens later, batched. */
  record(e: CaptureEntry): void {
    if (this.closed) return;
    const text = e.promptText;
    const blocks = promptBlockHashes(text, CAPTURE_BLOCK_TOKENS).map(blockHashHex);
    const line: Record<string, unknown> = {
      at: Math.max(0, r3((e.arrivalMs - this.originMs) / 1000)),
      model: e.model,
      api: e.api,
      ...(this.opts.prompts ? { prompt: text } : {}),
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
    };
    // A disk that cannot keep up must not grow memory without bound: drop (counted) past 64 batches.
    if (this.bufBytes > 64 * BATCH_BYTES) {
      this.dropped++;
      return;
    }
    const s = JSON.stringify(line) + '\n';
    this.buf.push(s);
    this.bufBytes += s.length;
    this.recorded++;
    if (this.bufBytes >= BATCH_BYTES) this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), FLUSH_MS);
      this.timer.unref();
    }
  }

  private flush(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.writing || this.buf.length === 0) {
      if (!this.writing) this.settle();
      return;
    }
    const data = Buffer.from(this.buf.join(''));
    this.buf = [];
    this.bufBytes = 0;
    if (this.size > 0 && this.size + data.length > this.opts.maxBytes) this.rotate();
    this.writing = true;
    write(this.fd, data, 0, data.length, null, (err) => {
      this.writing = false;
      if (!err) this.size += data.length;
      // More gathered meanwhile: write it now rather than wait for the timer.
      if (this.bufBytes >= BATCH_BYTES || (this.closed && this.buf.length > 0)) this.flush();
      else if (this.buf.length > 0 && !this.timer) {
        this.timer = setTimeout(() => this.flush(), FLUSH_MS);
        this.timer.unref();
      } else this.settle();
    });
  }

  /** FILE → FILE.1 → … → FILE.keep (the oldest dropped), and a fresh FILE. */
  private rotate(): void {
    const f = this.opts.file;
    closeSync(this.fd);
    if (this.opts.keep <= 0) rmSync(f, { force: true });
    else {
      rmSync(`${f}.${this.opts.keep}`, { force: true });
      for (let i = this.opts.keep - 1; i >= 1; i--)
        if (existsSync(`${f}.${i}`)) renameSync(`${f}.${i}`, `${f}.${i + 1}`);
      renameSync(f, `${f}.1`);
    }
    this.fd = openSync(f, 'a');
    this.size = 0;
  }

  private settle(): void {
    if (this.writing || this.buf.length > 0) return;
    const waiters = this.idle;
    this.idle = [];
    for (const w of waiters) w();
  }

  /** Write what is buffered and wait for it (tests, config reload). */
  async drain(): Promise<void> {
    if (!this.writing && this.buf.length === 0) return;
    const done = new Promise<void>((resolve) => this.idle.push(resolve));
    if (!this.writing) this.flush();
    await done;
  }

  /** Flush and close the file; later records are ignored. */
  async close(): Promise<void> {
    await this.drain();
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    closeSync(this.fd);
  }
}
