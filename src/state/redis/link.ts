/**
 * The quota store's connection to Redis, as up or down: every call bounded in time, a failure that
 * means "unreachable" marks it down (and a closed connection at once), and while down it refuses
 * at once (StoreUnavailableError) and PINGs until Redis answers again — then `onUp` restores what
 * the outage may have cost. Outages fail fast: nothing is queued while the connection is down.
 */
import type { Redis } from 'ioredis';
import { StoreUnavailableError, type StoreEvent } from '../quota-store.js';

/**
 * Redis replies that mean "not now" rather than "wrong": a server loading its dataset, a replica
 * that is read-only after a failover, a cluster without a master.
 */
const TRANSIENT_REPLY = /^(LOADING|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|BUSY)\b/;

export interface RedisLinkOptions {
  /** A call unanswered this long fails, and the link goes down. */
  readonly timeoutMs: number;
  /** How often a link that is down PINGs. */
  readonly probeMs: number;
  readonly onEvent: (e: StoreEvent) => void;
  /** Redis answers again: restore and finish what the outage cut off (a throw: down again). */
  readonly onUp: () => Promise<void>;
}

export class RedisLink {
  readonly #redis: Redis;
  readonly #o: RedisLinkOptions;
  #up = true;
  #downReason = '';
  #probe: NodeJS.Timeout | undefined;
  #probing = false;
  #closed = false;
  #outages = 0;

  constructor(redis: Redis, o: RedisLinkOptions) {
    this.#redis = redis;
    this.#o = o;
    // A closed connection is an outage now, not when the next command times out.
    redis.on('close', () => this.#markDown(new Error('connection closed')));
    redis.on('ready', () => this.#probeUp());
  }

  get up(): boolean {
    return this.#up;
  }

  get outages(): number {
    return this.#outages;
  }

  /** Refuse at once while down (callers that would only queue behind a failing round). */
  assertUp(): void {
    if (!this.#up) throw new StoreUnavailableError(this.#downReason);
  }

  /** Run one Redis call; a failure that means "unreachable" marks the store down. */
  async io<T>(call: () => Promise<T>): Promise<T> {
    this.assertUp();
    try {
      return await this.#timed(call());
    } catch (err) {
      const e = err as Error;
      if (e.name === 'ReplyError' && !TRANSIENT_REPLY.test(e.message)) throw err; // Redis said no
      this.#markDown(e);
      throw new StoreUnavailableError(e.message, { cause: err });
    }
  }

  /** No more probes; events after this are ignored. */
  close(): void {
    this.#closed = true;
    clearInterval(this.#probe);
  }

  /**
   * Bound a call in time. When the timer fires, the loop first gets one more pass over I/O
   * (setImmediate runs after the poll phase): after a long stall of the event loop, timers run
   * before sockets are read, and a reply already waiting must not count as a timeout.
   */
  #timed<T>(p: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(
        () =>
          setImmediate(() => {
            if (settled) return;
            settled = true;
            const err = new Error(`no answer from Redis within ${this.#o.timeoutMs} ms`);
            err.name = 'TimeoutError';
            reject(err);
          }),
        this.#o.timeoutMs,
      );
      p.then(
        (v) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve(v);
        },
        (e: unknown) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          reject(e instanceof Error ? e : new Error(String(e)));
        },
      );
    });
  }

  #markDown(err: Error): void {
    if (this.#closed || !this.#up) return;
    this.#up = false;
    this.#downReason = err.message;
    this.#outages++;
    this.#o.onEvent({ kind: 'down', error: err.message });
    this.#probe = setInterval(() => this.#probeUp(), this.#o.probeMs).unref();
  }

  /** While down: one PING at a time; the first answer brings the store back and checks the state. */
  /** A probe that throws past its own handling (a callback's bug) leaves the store down, probing. */
  #probeUp(): void {
    this.#tryUp().catch((err: unknown) =>
      this.#markDown(err instanceof Error ? err : new Error(String(err))),
    );
  }

  async #tryUp(): Promise<void> {
    if (this.#up || this.#probing || this.#closed) return;
    this.#probing = true;
    try {
      await this.#timed(this.#redis.ping());
    } catch {
      return;
    } finally {
      this.#probing = false;
    }
    if (this.#up || this.#closed) return;
    this.#up = true;
    clearInterval(this.#probe);
    this.#probe = undefined;
    this.#o.onEvent({ kind: 'up' });
    // Restore what Redis lost now, not on the next request; then finish what the outage cut off.
    try {
      await this.#o.onUp();
    } catch {
      // Down again: the next probe starts over.
    }
  }
}
