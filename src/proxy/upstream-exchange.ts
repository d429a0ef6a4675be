import type { ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { streamErrorChunk, type ErrorFormat } from '../http/errors.js';
import type { UsageFormat } from '../api/endpoints.js';
import type { StreamConverter, Translation } from './translate.js';
import { SseUsageScanner } from './stream-usage.js';
import { TailBuffer, responseUsage, type Usage } from './usage.js';

/** How one attempt on one backend ended. */
export type ExchangeEnd =
  /** The whole answer went to the client; `ok` when its status was below 400. */
  | { readonly kind: 'done'; readonly ok: boolean; readonly usage: Usage }
  /** Nothing reached the client: another backend may try. `status` is set for a 5xx/429 answer. */
  | {
      readonly kind: 'retry';
      /** What went wrong, without the backend's name. */
      readonly reason: string;
      readonly timeout: boolean;
      readonly status: number | undefined;
      /** A 429's Retry-After, in seconds, when it sent one. */
      readonly retryAfter?: string | undefined;
    }
  /** Bytes went out and the upstream failed, or the client left: the request is over. */
  | { readonly kind: 'over'; readonly reason: string | undefined };

export interface ExchangeRequest {
  readonly backend: string;
  readonly requestId: string;
  /** The client's API: the format of an error chunk ending a broken stream. */
  readonly format: ErrorFormat;
  /** Where a forwarded answer's token counts are (the endpoint's descriptor, src/api). */
  readonly usage: UsageFormat;
  readonly stream: boolean;
  readonly model: string;
  /** The request was translated for its backend (upstreamTranslation): the answer is converted back. */
  readonly translation?: Translation | undefined;
  /** Client arrival time (the clock's units, ms): Ollama's total_duration for translated answers. */
  readonly arrivedAt: number;
  /**
   * An OpenAI-API stream forwarded as it is: its events are counted and its usage read
   * (stream-usage.ts); 'drop' when the router asked for the usage and the client must not see it.
   */
  readonly usageScan?: 'drop' | 'count' | undefined;
}

class ClientGone extends Error {
  readonly code = 'LLMLB_CLIENT_GONE';
  constructor() {
    super('client closed the connection');
  }
}

/**
 * One upstream attempt as an undici dispatch handler that writes the answer straight into the
 * client's response: no Readable, no promise and no async resource per request (what
 * `pool.request` builds), and backpressure by pausing the upstream while the client's socket is
 * full. Retry-or-not is decided here, from whether any byte reached the client.
 */
export class UpstreamExchange implements Dispatcher.DispatchHandler {
  /** When the first response byte arrived (clock ms), for TTFB. */
  firstByteAt: number | undefined;
  /** When the attempt was dispatched (clock ms). */
  readonly dispatchedAt: number;
  /** Upstream body chunks received so far (progress, for the stall watch). */
  chunks = 0;
  /** The upstream's status once its headers arrived (0 before). */
  status = 0;
  private abortUpstream: ((err?: Error) => void) | undefined;
  private resumeUpstream: (() => void) | undefined;
  private paused = false;
  private cancelled = false;
  private ended = false;
  /** A 5xx or 429 answer: its body is read and dropped, then the attempt is retried. */
  private discard = false;
  private tail: TailBuffer | undefined;
  /** An Anthropic stream's first chunk: its message_start holds the prompt's token count. */
  private head: Buffer | undefined;
  /** A non-streamed answer's first chunk, not yet written. */
  private held: Buffer | undefined;
  private sse: StreamConverter | undefined;
  private scan: SseUsageScanner | undefined;
  private readonly tr: Translation | undefined;
  /** Translated whole bodies (and translated error bodies) are converted at the end. */
  private whole: Buffer[] | undefined;
  private contentType: string | undefined;
  private contentLength: string | undefined;
  private retryAfter: string | undefined;
  /** Why the router gave this attempt up (stuck or ejected backend), if it did. */
  private abandoned: Error | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly req: ExchangeRequest,
    private readonly clock: () => number,
    private readonly finish: (end: ExchangeEnd) => void,
  ) {
    this.dispatchedAt = clock();
    this.tr = req.translation;
  }

  /** The client left: abort the upstream request (now, or as soon as undici starts it). */
  cancel(): void {
    if (this.ended || this.cancelled) return;
    this.cancelled = true;
    this.abortUpstream?.(new ClientGone());
  }

  /**
   * The router gives the attempt up (its backend is stuck or was ejected): the upstream is aborted
   * and, if nothing reached the client yet, the attempt ends as retryable.
   */
  abandon(reason: string): void {
    if (this.ended || this.cancelled || this.abandoned) return;
    this.abandoned = new Error(reason);
    this.abortUpstream?.(this.abandoned);
  }

  // undici's callback handler interface, the one its own request() API implements: the newer
  // controller interface is wrapped in an adapter that parses every response's headers into an
  // object, which costs more than this whole class does per request.

  onConnect(abort: (err?: Error) => void): void {
    this.abortUpstream = abort;
    if (this.cancelled) abort(new ClientGone());
    else if (this.abandoned) abort(this.abandoned);
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true; // informational; the real answer follows
    this.status = statusCode;
    this.resumeUpstream = resume;
    if (statusCode >= 500 || statusCode === 429) {
      this.discard = true;
      if (statusCode === 429)
        for (let i = 0; i + 1 < rawHeaders.length; i += 2)
          if (rawHeaders[i]!.toString('latin1').toLowerCase() === 'retry-after')
            this.retryAfter = rawHeaders[i + 1]!.toString('latin1');
      return true;
    }
    const failed = statusCode >= 400;
    const tr = this.tr;
    if (tr !== undefined) {
      if (this.req.stream && !failed) this.sse = tr.stream();
      if (this.sse === undefined) this.whole = [];
    } else {
      // A scanned stream's usage is read by its scanner as it passes; any other answer's at its end.
      if (this.req.usageScan !== undefined && this.req.stream && !failed)
        this.scan = new SseUsageScanner(this.req.usageScan === 'drop');
      else this.tail = new TailBuffer(this.req.stream ? 4096 : 1 << 20);
      for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
        const k = rawHeaders[i]!;
        // Only two names matter here: compare by length first, decode only those.
        if (k.length === 12 && k.toString('latin1').toLowerCase() === 'content-type')
          this.contentType = rawHeaders[i + 1]!.toString('utf8');
        else if (k.length === 14 && k.toString('latin1').toLowerCase() === 'content-length')
          this.contentLength = rawHeaders[i + 1]!.toString('latin1');
      }
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.firstByteAt === undefined) this.firstByteAt = this.clock();
    this.chunks++;
    if (this.discard) return true;
    if (this.whole) {
      this.whole.push(chunk);
      return true;
    }
    if (this.sse) {
      const out = this.sse.push(chunk);
      if (out !== '') this.send(out);
      return !this.paused;
    }
    if (this.scan !== undefined) {
      const out = this.scan.push(chunk);
      if (out.length > 0) this.send(out);
      return !this.paused;
    }
    this.tail!.push(chunk);
    if (this.head === undefined && this.req.usage === 'anthropic' && this.req.stream)
      this.head = Buffer.from(chunk.subarray(0, 4096)); // undici reuses chunks
    if (!this.req.stream) {
      // A non-streamed answer: its first chunk waits, so a one-chunk answer leaves in one
      // res.end() (headers and body in one corked write); a second chunk sends it on.
      if (this.held === undefined && !this.res.headersSent) {
        this.held = chunk;
        return true;
      }
      if (this.held !== undefined) {
        this.send(this.held);
        this.held = undefined;
      }
    }
    this.send(chunk);
    return !this.paused;
  }

  onComplete(): void {
    this.finishAnswer();
  }

  onError(err: Error & { code?: string }): void {
    this.fail(err);
  }

  private finishAnswer(): void {
    if (this.ended) return;
    if (this.discard) {
      this.end({
        kind: 'retry',
        reason: `status ${this.status}`,
        timeout: false,
        status: this.status,
        retryAfter: this.retryAfter,
      });
      return;
    }
    const { res, req } = this;
    let usage: Usage;
    if (this.whole) {
      const text = Buffer.concat(this.whole).toString('utf8');
      const conv = this.status < 400 ? this.tr!.whole(text, this.clock() - req.arrivedAt) : undefined;
      usage = conv?.counts ?? {};
      if (!res.headersSent) this.writeHead();
      res.end(conv?.body ?? this.tr!.error(text, this.status < 400 ? 502 : this.status));
    } else if (this.sse) {
      const last = this.sse.end(this.clock() - req.arrivedAt);
      usage = this.sse.counts ?? {};
      this.send(last);
      res.end();
    } else {
      if (this.scan !== undefined) {
        const rest = this.scan.end();
        if (rest.length > 0) this.send(rest);
        // What the stream reported, else its token-carrying events counted.
        usage = this.scan.usage ?? { completionTokens: this.scan.contentEvents };
      } else usage = responseUsage(this.tail!, req.usage, req.stream, this.head);
      if (!res.headersSent) this.writeHead();
      if (this.held !== undefined) res.end(this.held);
      else res.end();
    }
    this.end({ kind: 'done', ok: this.status < 400, usage });
  }

  private fail(err: Error & { code?: string }): void {
    if (this.ended) return;
    if (this.cancelled) return this.end({ kind: 'over', reason: undefined });
    // Nothing reached the client yet: safe to try elsewhere.
    if (!this.res.headersSent)
      return this.end({
        kind: 'retry',
        reason: err.message,
        timeout: this.abandoned !== undefined || isTimeout(err),
        status: undefined,
      });
    // Bytes went out: never retry; end the stream with an error in its own format.
    if (this.req.stream)
      this.res.end(
        streamErrorChunk(this.req.format, `upstream ${this.req.backend} failed mid-stream: ${err.message}`),
      );
    else this.res.destroy();
    this.end({ kind: 'over', reason: err.message });
  }

  private end(e: ExchangeEnd): void {
    this.ended = true;
    this.finish(e);
  }

  private writeHead(): void {
    const h: Record<string, string> = {
      'x-llmlb-backend': this.req.backend,
      'x-request-id': this.req.requestId,
    };
    if (this.tr !== undefined) h['content-type'] = this.tr.contentType(this.sse !== undefined);
    else {
      if (this.contentType !== undefined) h['content-type'] = this.contentType;
      if (this.contentLength !== undefined) h['content-length'] = this.contentLength;
    }
    this.res.writeHead(this.status, h);
  }

  private send(chunk: Buffer | string): void {
    const res = this.res;
    if (!res.headersSent) this.writeHead();
    if (!res.write(chunk) && !this.paused) {
      // The client's socket is full: stop reading the upstream until it drains.
      this.paused = true;
      res.once('drain', this.onDrain);
    }
  }

  private readonly onDrain = (): void => {
    this.paused = false;
    this.resumeUpstream?.();
  };
}

export function isTimeout(e: Error & { code?: string }): boolean {
  return (
    e.code === 'UND_ERR_HEADERS_TIMEOUT' ||
    e.code === 'UND_ERR_BODY_TIMEOUT' ||
    e.code === 'UND_ERR_CONNECT_TIMEOUT'
  );
}
