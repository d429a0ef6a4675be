/**
 * `llmlb serve --workers N` on one host: the workers share their view through the cluster primary
 * over IPC (no Redis). A worker's SharedView rounds go to the primary, which answers from one
 * SharedViewBook (the Lua script's twin), so caps are split between workers exactly as between
 * routers on Redis. The primary drops a worker's share the moment it exits.
 *
 * Messages (worker → primary, answered to that worker with the same seq):
 *   { t: 'llmlb:view-round', seq, id, now, ttl, entries } → { t: 'llmlb:answer', seq, ok, value }
 *   { t: 'llmlb:metrics', seq }                         → { t: 'llmlb:answer', seq, ok, value: text }
 *   { t: 'llmlb:ready', seq: 0, banner }                 (no answer)
 * and primary → one worker: { t: 'llmlb:view-grant', seq: 0, key, granted } a hand-over the
 * book made to it in another worker's round (shared-view-book.ts; no answer).
 * and primary → worker: { t: 'llmlb:metrics-json', seq } → { t: 'llmlb:answer', seq, ok, value }.
 */
import type { Grant, RoundAnswer, RoundEntry, SharedViewBook } from './shared-view-book.js';
import type { SharedViewTransport } from './shared-view.js';
import type { StateTransport } from './shared-state.js';

export const VIEW_ROUND = 'llmlb:view-round';
/** Primary → the worker a hand-over is for: { key, granted } (no answer). */
export const VIEW_GRANT = 'llmlb:view-grant';
export const METRICS = 'llmlb:metrics';
export const ANSWER = 'llmlb:answer';
/** Worker → primary once listening: { banner } (printed once by the primary). */
export const READY = 'llmlb:ready';
/** Primary → worker: its registry's metrics as JSON (the primary sums the workers'). */
export const METRICS_JSON = 'llmlb:metrics-json';
/** Worker → primary: { change } an admin change it applied (no answer); the primary relays it. */
export const ADMIN_CHANGE = 'llmlb:admin';
/** Primary → worker: { change } to apply (another worker's, or replayed to a new worker). */
export const ADMIN_APPLY = 'llmlb:admin-apply';

/**
 * Worker → primary → every other worker: { payload } a shared-state batch (src/state/shared-state.ts),
 * relayed as is (no answer).
 */
export const STATE = 'llmlb:state';
/**
 * Primary → every worker: { router } a worker exited (its shared-state router id, `worker-<id>`):
 * its pushes leave the others' counts at once (no answer).
 */
export const STATE_GONE = 'llmlb:state-gone';

/** A worker's shared-state router id under serve --workers N: the primary's name for it. */
export const workerRouterId = (clusterWorkerId: number): string => `worker-${clusterWorkerId}`;

/** A worker's shared-state batches, relayed by the primary to the other workers. */
export function clusterStateTransport(end: IpcEnd): StateTransport {
  let listener: ((m: unknown) => void) | undefined;
  let goneListener: ((m: unknown) => void) | undefined;
  return {
    publish: (payload) => {
      if (!end.send?.({ t: STATE, seq: 0, payload })) throw new Error('IPC channel closed');
    },
    subscribe: (onMessage) => {
      listener = (m: unknown): void => {
        if (isClusterMessage(m) && m.t === STATE && typeof m.payload === 'string') onMessage(m.payload);
      };
      end.on('message', listener);
    },
    gone: (onGone) => {
      goneListener = (m: unknown): void => {
        if (isClusterMessage(m) && m.t === STATE_GONE && typeof m.router === 'string') onGone(m.router);
      };
      end.on('message', goneListener);
    },
    close: () => {
      if (listener) end.off('message', listener);
      if (goneListener) end.off('message', goneListener);
    },
  };
}

/** A worker as the primary's relay sees it: cluster's Worker.send with its written-callback. */
export interface RelayTarget {
  send(message: ClusterMessage, callback: (error: Error | null) => void): boolean;
  isConnected(): boolean;
}

/**
 * The primary's relay of shared-state batches, bounded per worker: Node's IPC queues without limit
 * a message to a worker that does not read (stalled, or busy for seconds), so the primary counts
 * what it handed each worker and the pipe has not taken yet (Worker.send's callback), and drops a
 * batch beyond maxMessages or maxBytes for that worker. A dropped batch is a gap in the receiver's
 * sequence: its counts are squared by the sender's next heartbeat (sharedState.heartbeatMs).
 */
export class StateRelay<T extends RelayTarget> {
  readonly stats = { relayed: 0, dropped: 0 };
  private readonly backlogs = new Map<T, { messages: number; bytes: number }>();

  constructor(
    private readonly maxMessages = 1024,
    private readonly maxBytes = 8 * 1024 * 1024,
  ) {}

  /** Hands `m` (`bytes` long) to `to` unless its backlog is full; false when dropped. */
  relay(to: T, m: ClusterMessage, bytes: number): boolean {
    if (!to.isConnected()) return false;
    let b = this.backlogs.get(to);
    if (!b) this.backlogs.set(to, (b = { messages: 0, bytes: 0 }));
    if (b.messages >= this.maxMessages || b.bytes + bytes > this.maxBytes) {
      this.stats.dropped++;
      return false;
    }
    const backlog = b;
    backlog.messages++;
    backlog.bytes += bytes;
    let done = false;
    const written = (): void => {
      if (done) return;
      done = true;
      backlog.messages--;
      backlog.bytes -= bytes;
    };
    try {
      to.send(m, written); // called once written to the pipe, or with the error that stopped it
    } catch {
      written();
      return false;
    }
    this.stats.relayed++;
    return true;
  }

  /** A worker gone: its backlog is no longer counted (late callbacks change nothing). */
  forget(to: T): void {
    this.backlogs.delete(to);
  }

  /** Batches handed to workers that their pipes have not taken yet, all workers together. */
  get backlog(): number {
    let n = 0;
    for (const b of this.backlogs.values()) n += b.messages;
    return n;
  }
}

export interface ClusterMessage {
  readonly t: string;
  readonly seq: number;
  readonly [k: string]: unknown;
}

export function isClusterMessage(m: unknown): m is ClusterMessage {
  return (
    typeof m === 'object' &&
    m !== null &&
    typeof (m as { t?: unknown }).t === 'string' &&
    (m as { t: string }).t.startsWith('llmlb:') &&
    typeof (m as { seq?: unknown }).seq === 'number'
  );
}

/** An IPC end: a cluster worker's `process`, or the primary's `Worker` object. */
export interface IpcEnd {
  send?(message: ClusterMessage): boolean;
  on(event: 'message', listener: (m: unknown) => void): unknown;
  off(event: 'message', listener: (m: unknown) => void): unknown;
}

/** Requests over one IPC end: each answered once, or rejected after timeoutMs. */
export class IpcChannel {
  private seq = 0;
  private readonly pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }
  >();
  private readonly onMessage = (m: unknown): void => {
    if (!isClusterMessage(m) || m.t !== ANSWER) return;
    const p = this.pending.get(m.seq);
    if (!p) return;
    this.pending.delete(m.seq);
    clearTimeout(p.timer);
    if (m.ok === true) p.resolve(m.value);
    else p.reject(new Error(typeof m.value === 'string' ? m.value : 'primary refused'));
  };

  constructor(
    private readonly end: IpcEnd,
    private readonly timeoutMs = 1000,
  ) {
    end.on('message', this.onMessage);
  }

  ask(t: string, body: Record<string, unknown> = {}, timeoutMs = this.timeoutMs): Promise<unknown> {
    const seq = ++this.seq;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(seq);
        reject(new Error(`no answer over IPC within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      this.pending.set(seq, { resolve, reject, timer });
      try {
        if (!this.end.send?.({ ...body, t, seq })) throw new Error('IPC channel closed');
      } catch (err) {
        this.pending.delete(seq);
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  close(): void {
    this.end.off('message', this.onMessage);
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new Error('closed'));
    }
    this.pending.clear();
  }
}

/**
 * A worker's shared-view rounds, answered by the primary's book. With `end` (and `routerId`, the
 * primary's name for this worker) it hears the hand-overs the book sends it.
 */
export function clusterViewTransport(
  channel: IpcChannel,
  end?: IpcEnd,
  routerId?: string,
): SharedViewTransport {
  return {
    round: async (id, now, ttl, entries) => {
      const v = await channel.ask(VIEW_ROUND, { id, now, ttl, entries });
      if (!Array.isArray(v) || v.length !== entries.length) throw new Error('malformed view answer');
      return v as RoundAnswer[];
    },
    ...(end && routerId !== undefined
      ? {
          grants: (onGrant: (g: Grant) => void): void => {
            end.on('message', (m: unknown) => {
              if (!isClusterMessage(m) || m.t !== VIEW_GRANT) return;
              if (typeof m.key === 'string' && typeof m.granted === 'number')
                onGrant({ router: routerId, key: m.key, granted: m.granted });
            });
          },
        }
      : {}),
  };
}

function isEntries(v: unknown): v is RoundEntry[] {
  return (
    Array.isArray(v) &&
    v.every(
      (e: unknown) =>
        typeof e === 'object' &&
        e !== null &&
        typeof (e as RoundEntry).key === 'string' &&
        typeof (e as RoundEntry).inFlight === 'number' &&
        typeof (e as RoundEntry).cap === 'number' &&
        typeof (e as RoundEntry).want === 'number' &&
        typeof (e as RoundEntry).enforced === 'number' &&
        ((e as RoundEntry).taken === undefined || typeof (e as RoundEntry).taken === 'number') &&
        ((e as RoundEntry).waitedMs === undefined || typeof (e as RoundEntry).waitedMs === 'number'),
    )
  );
}

/**
 * The primary's side of one round: `routerId` is the worker's (the primary's own name for it, so a
 * worker that exits can be dropped by that name). Returns the answer message to send back.
 */
export function answerRound(book: SharedViewBook, routerId: string, m: ClusterMessage): ClusterMessage {
  if (typeof m.now !== 'number' || typeof m.ttl !== 'number' || !isEntries(m.entries))
    return { t: ANSWER, seq: m.seq, ok: false, value: 'malformed view round' };
  return { t: ANSWER, seq: m.seq, ok: true, value: book.round(routerId, m.now, m.ttl, m.entries) };
}

/** A worker's answers to the primary's requests (`handlers` by message type). */
export function answerPrimary(
  end: IpcEnd,
  handlers: ReadonlyMap<string, (m: ClusterMessage) => Promise<unknown>>,
): () => void {
  const on = (m: unknown): void => {
    if (!isClusterMessage(m)) return;
    const h = handlers.get(m.t);
    if (!h) return;
    const reply = (r: ClusterMessage): void => {
      try {
        end.send?.(r);
      } catch {
        // the primary is gone: this worker is about to be, too
      }
    };
    h(m).then(
      (value) => reply({ t: ANSWER, seq: m.seq, ok: true, value }),
      (err: unknown) => reply({ t: ANSWER, seq: m.seq, ok: false, value: String(err) }),
    );
  };
  end.on('message', on);
  return () => end.off('message', on);
}
