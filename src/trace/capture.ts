/**
 * Trace capture (`trace: { file, maxBytes, keep }`): one JSONL line per request `serve` routed, in
 * the llmlb trace format (src/workloads/trace.ts), so `llmlb whatif --trace FILE` replays it. No
 * prompt text: lengths, the prompt's block hash chain (prefix sharing) and a hash of the session
 * key — text only when `log.prompts` is on.
 *
 * Off the hot path: record() encodes one line into a buffer; the buffer goes to disk in one
 * asynchronous write when it holds BATCH_BYTES or FLUSH_MS after its first line, one write in
 * flight at a time (as src/log.ts batches log lines). The file rotates by size: at maxBytes it
 * becomes FILE.1 (FILE.1 → FILE.2 …, keeping `keep` old files) and a new FILE starts.
 *
 * A disk that fails never fails a request or the router: a write that fails (ENOSPC, EIO…) or a
 * rotation that cannot rename or reopen costs the lines of that batch, counted in `dropped`
 * (and `llmlb_trace_lines_total{outcome="dropped"}`), and the next batch tries again.
 */
import type { WorkloadApi } from '../api/endpoints.js';
import {
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  statSync,
  writev,
} from 'node:fs';
import { dirname } from 'node:path';
import { promptBlockHashes } from '../engine/tokens.js';

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
  readonly api: WorkloadApi;
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

/** A finite number as JSON writes it; NaN and ±Infinity as null (as JSON.stringify does). */
const num = (x: number): string => (Number.isFinite(x) ? `${x}` : 'null');

/** ".001" … ".999" with trailing zeros dropped, '' for 0: the fraction of a number rounded to 3 decimals. */
const FRAC: readonly string[] = Array.from({ length: 1000 }, (_, f) =>
  f === 0 ? '' : `.${String(f).padStart(3, '0').replace(/0+$/, '')}`,
);

/**
 * `x` rounded to 3 decimals, as JSON.stringify writes that number (Math.round(x·1000)/1000), built
 * from integers: formatting a fraction costs ~10× more. Below 10^12 the shortest decimal that reads
 * back as k/1000 is k/1000 itself (any other with ≤ 3 decimals is ≥ 0.001 away, far more than the
 * double's spacing), so the text is the same; larger and non-finite values take the general path.
 */
export function jsonSeconds3(x: number): string {
  const k = Math.round(x * 1000);
  if (!(k > -1e15 && k < 1e15)) return num(k / 1000);
  const a = k < 0 ? -k : k;
  const whole = Math.floor(a / 1000);
  return (k < 0 ? '-' : '') + whole + FRAC[a - whole * 1000]!;
}

const HEX1: readonly string[] = Array.from({ length: 16 }, (_, i) => i.toString(16));
const HEX2: readonly string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
/** 2^28: a block hash (< 2^53) is hi · 2^28 + lo, hi below 2^25 and lo below 2^28, 7 hex digits each. */
const LO28 = 0x10000000;

/** blockHashHex (14 hex digits) from lookup tables: Number#toString(16) of a double costs ~7× more. */
export function blockHex(h: number): string {
  const hi = Math.floor(h / LO28);
  const lo = h - hi * LO28;
  return (
    HEX1[hi >>> 24]! +
    HEX2[(hi >>> 16) & 255]! +
    HEX2[(hi >>> 8) & 255]! +
    HEX2[hi & 255]! +
    HEX1[lo >>> 24]! +
    HEX2[(lo >>> 16) & 255]! +
    HEX2[(lo >>> 8) & 255]! +
    HEX2[lo & 255]!
  );
}

/**
 * One trace line (no newline) for `e`, arrival measured from `originMs`: the JSON that
 * JSON.stringify gives for the trace record (src/workloads/trace.ts), same keys in the same order,
 * written by hand — only the strings go through JSON.stringify, for their escaping.
 */
export function captureLine(e: CaptureEntry, originMs: number, prompts: boolean): string {
  const text = e.promptText;
  let s = `{"at":${jsonSeconds3(Math.max(0, (e.arrivalMs - originMs) / 1000))},"model":${JSON.stringify(e.model)},"api":${JSON.stringify(e.api)}`;
  if (prompts) s += `,"prompt":${JSON.stringify(text)}`;
  s += `,"promptTokens":${num(e.promptTokens ?? Math.ceil(text.length / 4))},"outputTokens":${num(Math.max(1, e.outputTokens ?? 1))}`;
  if (e.maxTokens !== undefined) s += `,"maxTokens":${num(e.maxTokens)}`;
  if (e.sessionKey !== undefined && e.sessionKey !== '') s += `,"sessionKey":"${hashKey(e.sessionKey)}"`;
  s += `,"blockTokens":${CAPTURE_BLOCK_TOKENS},"blocks":[`;
  const hashes = promptBlockHashes(text, CAPTURE_BLOCK_TOKENS);
  for (let i = 0; i < hashes.length; i++) s += `${i === 0 ? '"' : ',"'}${blockHex(hashes[i]!)}"`;
  s += ']';
  if (e.backend !== undefined) s += `,"backend":${JSON.stringify(e.backend)}`;
  if (e.ttftMs !== undefined) s += `,"ttftS":${jsonSeconds3(e.ttftMs / 1000)}`;
  return `${s},"e2eS":${jsonSeconds3(e.e2eMs / 1000)},"status":${num(e.status)}}`;
}

/** One write buffer: a batch and room for the line that completes it (a longer line gets its own). */
const CHUNK_BYTES = BATCH_BYTES + 16 * 1024;
const NEWLINE = Buffer.from('\n');
/**
 * Entries kept for one serialization pass, at most, and their prompt characters (the text is held
 * until then). Serializing a batch in one loop costs a fraction of doing it once per request: on
 * the request path the code and data are cold (measured: docs/results.md, trace capture cost).
 */
export const BATCH_ENTRIES = 256;
const BATCH_CHARS = 1 << 20;

export class TraceCapture {
  private readonly originMs: number;
  /**
   * Entries wait in `pending` until BATCH_ENTRIES of them (or the flush) are serialized together;
   * their lines are UTF-8-encoded straight into `chunk` (no string kept per line, no join, no
   * second copy); full chunks wait in `sealed` while a write is in flight.
   */
  private pending: CaptureEntry[] = [];
  private pendingChars = 0;
  private chunk = Buffer.allocUnsafeSlow(CHUNK_BYTES);
  private used = 0;
  private sealed: Buffer[] = [];
  /** Bytes waiting: the sealed chunks and `used`. */
  private bufBytes = 0;
  /** Lines in those bytes (what a failed write loses). */
  private bufLines = 0;
  private timer: NodeJS.Timeout | undefined;
  private writing = false;
  /** -1 while the file could not be (re)opened: the next flush tries again. */
  private fd: number;
  private size: number;
  /** A short write left part of a line in the file: the next write starts with a newline. */
  private torn = false;
  private closed = false;
  private idle: (() => void)[] = [];
  /** Lines taken by record(). */
  recorded = 0;
  /** Lines on disk. */
  written = 0;
  /**
   * Lines lost: the disk fell behind (never blocks a request) or a write or rotation failed.
   * recorded = written + dropped (less what record() dropped) + what is still buffered.
   */
  dropped = 0;
  /** Writes or rotations that failed, and the last one's error code. */
  failures = 0;
  lastError: string | undefined;

  constructor(private readonly opts: CaptureOptions) {
    this.originMs = opts.originMs ?? Date.now();
    // Opening at start is checked (a bad path is a config error the operator sees at once).
    mkdirSync(dirname(opts.file), { recursive: true });
    this.fd = openSync(opts.file, 'a');
    this.size = statSync(opts.file).size;
  }

  /**
   * Take one request: kept (not copied: `e` must not change afterwards) and serialized with the
   * next batch; the write happens later, batched.
   */
  record(e: CaptureEntry): void {
    if (this.closed) return;
    // A disk that cannot keep up must not grow memory without bound: drop (counted) past 64 batches.
    if (this.bufBytes > 64 * BATCH_BYTES) {
      this.dropped++;
      return;
    }
    this.pending.push(e);
    this.pendingChars += e.promptText.length;
    this.recorded++;
    if (this.pending.length >= BATCH_ENTRIES || this.pendingChars >= BATCH_CHARS) {
      this.encode();
      if (this.bufBytes >= BATCH_BYTES) {
        this.flush();
        return;
      }
    }
    if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), FLUSH_MS);
      this.timer.unref();
    }
  }

  /** The pending entries' lines, UTF-8, into the write buffers. */
  private encode(): void {
    const list = this.pending;
    if (list.length === 0) return;
    this.pending = [];
    this.pendingChars = 0;
    const prompts = this.opts.prompts === true;
    for (const e of list) {
      const s = captureLine(e, this.originMs, prompts);
      // UTF-8 takes at most 3 bytes per UTF-16 unit; and the newline.
      const room = s.length * 3 + 1;
      if (room > this.chunk.length - this.used) this.seal(room);
      const n = this.chunk.write(s, this.used);
      this.chunk[this.used + n] = 0x0a;
      this.used += n + 1;
      this.bufBytes += n + 1;
      this.bufLines++;
    }
  }

  /** Anything recorded and not yet handed to a write. */
  private waiting(): boolean {
    return this.bufBytes > 0 || this.pending.length > 0;
  }

  /** The current chunk's bytes join the sealed ones; a fresh chunk with at least `room` bytes. */
  private seal(room = 0): void {
    if (this.used > 0) this.sealed.push(this.chunk.subarray(0, this.used));
    if (this.used > 0 || room > this.chunk.length)
      this.chunk = Buffer.allocUnsafeSlow(Math.max(CHUNK_BYTES, room));
    this.used = 0;
  }

  private flush(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.encode();
    if (this.writing || this.bufBytes === 0) {
      if (!this.writing) this.settle();
      return;
    }
    this.seal();
    const data = this.sealed;
    const bytes = this.bufBytes;
    const lines = this.bufLines;
    this.sealed = [];
    this.bufBytes = 0;
    this.bufLines = 0;
    if (this.fd >= 0 && this.size > 0 && this.size + bytes > this.opts.maxBytes) this.rotate();
    if (this.fd < 0) this.reopen();
    if (this.fd < 0) {
      this.dropped += lines;
      this.settle();
      return;
    }
    if (this.torn) data.unshift(NEWLINE);
    const lead = this.torn ? 1 : 0;
    this.torn = false;
    this.writing = true;
    writev(this.fd, data, (err, done) => {
      this.writing = false;
      this.wrote(err, data, lead, bytes + lead, lines, err ? 0 : done);
      // More gathered meanwhile: write it now rather than wait for the timer — also when drain()
      // or close() waits (the timer is unref'd: nothing else may keep the process up for it).
      if (this.bufBytes >= BATCH_BYTES || (this.waiting() && (this.closed || this.idle.length > 0)))
        this.flush();
      else if (this.waiting() && !this.timer) {
        this.timer = setTimeout(() => this.flush(), FLUSH_MS);
        this.timer.unref();
      } else this.settle();
    });
  }

  /**
   * Account one write of `bytes` (its first `lead` a newline ending a torn line) holding `lines`
   * lines, of which `done` bytes reached the file. A short write leaves a partial line: the lines
   * not whole on disk are dropped, and the next write ends the fragment so later lines parse.
   */
  private wrote(
    err: NodeJS.ErrnoException | null,
    data: readonly Buffer[],
    lead: number,
    bytes: number,
    lines: number,
    done: number,
  ): void {
    this.size += done;
    if (!err && done >= bytes) {
      this.written += lines;
      return;
    }
    this.failures++;
    this.lastError = err?.code ?? 'short write';
    if (done === 0) {
      this.dropped += lines;
      this.torn ||= lead > 0;
      return;
    }
    // Lines whose newline made it to disk are whole.
    let whole = 0;
    let left = done - lead;
    for (let i = lead > 0 ? 1 : 0; i < data.length && left > 0; i++) {
      const b = data[i]!;
      const n = Math.min(left, b.length);
      for (let k = 0; k < n; k++) if (b[k] === 0x0a) whole++;
      left -= n;
    }
    this.written += whole;
    this.dropped += lines - whole;
    this.torn = true;
  }

  /**
   * FILE → FILE.1 → … → FILE.keep (the oldest dropped), and a fresh FILE. A step that fails (the
   * directory gone, a full or read-only disk) leaves the file closed: reopen() tries again, and the
   * batch is dropped if that fails too.
   */
  private rotate(): void {
    const f = this.opts.file;
    try {
      closeSync(this.fd);
    } catch {
      // Already unusable: reopening below is what matters.
    }
    this.fd = -1;
    try {
      if (this.opts.keep <= 0) rmSync(f, { force: true });
      else {
        rmSync(`${f}.${this.opts.keep}`, { force: true });
        for (let i = this.opts.keep - 1; i >= 1; i--)
          if (existsSync(`${f}.${i}`)) renameSync(`${f}.${i}`, `${f}.${i + 1}`);
        renameSync(f, `${f}.1`);
      }
    } catch (err) {
      this.failed(err);
    }
    this.reopen();
  }

  /** Open FILE for appending (fd -1 and counted when it cannot be). */
  private reopen(): void {
    try {
      mkdirSync(dirname(this.opts.file), { recursive: true });
      this.fd = openSync(this.opts.file, 'a');
      this.size = fstatSync(this.fd).size;
    } catch (err) {
      this.fd = -1;
      this.failed(err);
    }
  }

  private failed(err: unknown): void {
    this.failures++;
    this.lastError = (err as NodeJS.ErrnoException).code ?? String(err);
  }

  private settle(): void {
    if (this.writing || this.waiting()) return;
    const waiters = this.idle;
    this.idle = [];
    for (const w of waiters) w();
  }

  /** Write what is buffered and wait for it (tests, config reload). */
  async drain(): Promise<void> {
    if (!this.writing && !this.waiting()) return;
    const done = new Promise<void>((resolve) => this.idle.push(resolve));
    if (!this.writing) this.flush();
    await done;
  }

  /** Flush and close the file; later records are ignored. */
  async close(): Promise<void> {
    await this.drain();
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.fd >= 0) closeSync(this.fd);
    this.fd = -1;
  }
}
