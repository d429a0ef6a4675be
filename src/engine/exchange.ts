/**
 * One generation request in flight on the emulated engine: turns the model's token progress into
 * stream chunks (or one body at the end), and injects the mid-stream death fault.
 */
import type { ServerResponse } from 'node:http';
import type { FinishedEvent, SequenceListener } from './driver.js';
import { CHARS_PER_TOKEN } from './tokens.js';
import type { Wire } from './wire.js';

export interface ExchangeOptions {
  readonly res: ServerResponse;
  readonly wire: Wire;
  readonly stream: boolean;
  /** The whole answer, drawn at submit (the engine caches its blocks); token i is its i-th 4 chars. */
  readonly answer: string;
  /** Model seconds per real second, to report real durations. */
  readonly timeScale: number;
  /** The client asked for fewer tokens than the model would have produced. */
  readonly truncated: boolean;
  /** Destroy the socket after this many streamed chunks (fault injection). */
  readonly dieAfterChunks?: number | undefined;
}

export class Exchange implements SequenceListener {
  /** True once the response is complete or deliberately broken: later progress is ignored. */
  private done = false;
  private written = 0;
  private chunks = 0;
  private text = '';

  constructor(private readonly o: ExchangeOptions) {}

  progress(total: number): void {
    if (this.done || total <= this.written) return;
    const piece = this.o.answer.slice(this.written * CHARS_PER_TOKEN, total * CHARS_PER_TOKEN);
    this.written = total;
    if (!this.o.stream) {
      this.text += piece;
      return;
    }
    // One event per token, as vLLM, SGLang, llama.cpp and Ollama stream: clients (and the router,
    // when a stream carries no usage) count tokens by events. Tokens decoded in one step still
    // leave in one write.
    let events = '';
    for (let t = 0; t * CHARS_PER_TOKEN < piece.length; t++)
      events += this.o.wire.chunk(piece.slice(t * CHARS_PER_TOKEN, (t + 1) * CHARS_PER_TOKEN));
    const { res } = this.o;
    if (!res.headersSent) {
      res.writeHead(200, { 'content-type': this.o.wire.streamContentType, 'cache-control': 'no-cache' });
    }
    this.chunks++;
    const dieAfter = this.o.dieAfterChunks;
    if (dieAfter === undefined || this.chunks < dieAfter) {
      res.write(events);
      return;
    }
    // Fault: once this chunk has reached the socket, cut the connection like a crashing server. The
    // server's 'close' handler then cancels the sequence.
    this.done = true;
    res.write(events, () => res.socket?.destroy());
  }

  finished(ev: FinishedEvent): void {
    this.progress(ev.outputTokens);
    if (this.done) return;
    this.done = true;
    const s = this.o.timeScale;
    const c = {
      promptTokens: ev.promptTokens,
      outputTokens: ev.outputTokens,
      cachedTokens: ev.cachedTokens,
      truncated: this.o.truncated,
      queuedS: ev.queuedS / s,
      prefillS: ev.prefillS / s,
      decodeS: ev.decodeS / s,
    };
    const { res, wire } = this.o;
    if (this.o.stream) {
      res.end(wire.end(c));
      return;
    }
    const body = JSON.stringify(wire.body(this.text, c));
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  }
}
