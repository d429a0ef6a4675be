/**
 * N live routers that behave as one (issue #31, item 2): each router publishes every push and
 * every answer it makes (backend, model, the head of the prompt, token counts, times) and applies
 * the others' to its own policy, as the simulator's `shared-state` mode does (src/sim/shared-state.ts):
 * a remote push is the policy's onDispatch and a remote answer its onComplete, on the backend's
 * view, without taking a local slot; the others' in-flight counts are the pushes not yet answered.
 * So every router's prefix trie, prefix credit, estimated-wait flights and workload classes learn
 * from all the traffic, not from the third of it that reached them.
 *
 * Transport (StateTransport): Redis pub/sub, one channel per fleet key prefix
 * (`<prefix>:shared-state`), across hosts; the cluster primary's IPC relay for
 * `serve --workers N` on one host (src/state/cluster-view.ts).
 *
 * Messages are JSON batches `{ v: 1, r: router, s: seq, c?: counts, e: events }`: events made in
 * one tick go out together on the next. A batch with `c` (this router's published in-flight per
 * backend) goes out every heartbeatMs; the receiver squares its count of that router's requests
 * with it (a lost message costs one heartbeat, not a count stuck forever). A router not heard from
 * for ttlMs is presumed gone: its requests are answered (failed) to the policy and leave the counts.
 *
 * Bounds: at most maxPending events wait to go out (the oldest are dropped and counted), at most
 * maxInFlightPublishes batches are handed to the transport at once, at most maxRemoteRequests
 * remote requests are remembered (the oldest are dropped). Malformed messages are counted and ignored.
 *
 * One file (over ~500 lines) on purpose: the publisher, the receiver, the heartbeat squaring and the
 * departure of a router all read and write the same per-router books (its remote requests and
 * counts); split apart, each part would reach into the others' state.
 */
import type { BackendView, CompletionReport, RequestInfo } from '../core/types.js';

/** How batches reach the other routers. publish rejects (or throws) when it cannot send. */
export interface StateTransport {
  publish(payload: string): Promise<unknown> | void;
  /** Every payload published by any router (this one's included: they are skipped by id). */
  subscribe(onMessage: (payload: string) => void): void;
  /**
   * Routers known gone (serve --workers N: the primary saw a worker exit): their requests leave
   * the counts at once, not after ttlMs. Optional: Redis has no such notice.
   */
  gone?(onGone: (routerId: string) => void): void;
  close(): void;
}

/** What the router lends the shared state: its backends' views and its policy's hooks. */
export interface SharedStateHost {
  backend(name: string): BackendView | undefined;
  /** Another router pushed `req` to `backend`: the policy's onDispatch (no local slot taken). */
  remoteDispatch(req: RequestInfo, backend: BackendView): void;
  /** Another router's request ended: the policy's onComplete. */
  remoteComplete(req: RequestInfo, backend: BackendView, report: CompletionReport): void;
  /** Backends whose shared state changed by one message: a hold on load is asked again. */
  changed(backends: ReadonlySet<string>): void;
}

export interface SharedStateOptions {
  readonly routerId: string;
  /** Characters of a prompt published (its head; the length is sent, the rest padded). */
  readonly promptChars?: number | undefined;
  readonly heartbeatMs?: number | undefined;
  readonly ttlMs?: number | undefined;
  readonly maxPending?: number | undefined;
  readonly maxInFlightPublishes?: number | undefined;
  readonly maxRemoteRequests?: number | undefined;
  /** The host clock the router's times are in (performance.now()). */
  readonly hostNow?: () => number;
  /** Wall-clock ms at hostNow() = 0 (performance.timeOrigin): times travel as wall clock. */
  readonly timeOrigin?: number | undefined;
}

/** Counters for /metrics and tests. */
export interface SharedStateStats {
  published: number;
  publishedBytes: number;
  publishFailures: number;
  received: number;
  receivedBytes: number;
  malformed: number;
  /** Events dropped before they went out (the pending buffer was full). */
  dropped: number;
  /** Batches from another router missing in its sequence (lost while Redis was away). */
  gaps: number;
  /** Answers for a request this router never heard pushed (ignored). */
  unmatched: number;
  /** Routers presumed gone (silent for ttlMs). */
  expired: number;
  /** Routers the transport said were gone (a worker's exit), dropped at once. */
  departed: number;
  /** Other routers' pushes applied to this router's policy. */
  remoteDispatched: number;
  /** Remote requests ended when their counts were squared with a heartbeat (their answer was lost). */
  reconciled: number;
  /** From a batch's sending to its applying here (wall clock, ms): summed, and the most. */
  lagMsSum: number;
  lagMsMax: number;
}

interface DispatchEvent {
  readonly k: 'd';
  readonly id: string;
  readonly b: string;
  readonly m: string;
  readonly a: string;
  /** arrivedAt, wall ms. */
  readonly t: number;
  /** Prompt head, and the prompt's full length. */
  readonly p: string;
  readonly n: number;
  readonly x?: number;
  readonly sk?: string;
  readonly th?: string;
}

interface CompleteEvent {
  readonly k: 'c';
  readonly id: string;
  readonly b: string;
  readonly ok: boolean;
  /** dispatchedAt, firstByteAt, finishedAt: wall ms. */
  readonly da: number;
  readonly fa?: number;
  readonly fw?: boolean;
  readonly fi: number;
  readonly pt?: number;
  readonly ct?: number;
  readonly pe?: number;
  readonly ev?: number;
  readonly ca?: number;
}

type StateEvent = DispatchEvent | CompleteEvent;

interface Batch {
  readonly v: 1;
  readonly r: string;
  readonly s: number;
  /** Wall-clock ms when it was sent. */
  readonly w?: number;
  readonly c?: Record<string, number>;
  readonly e: StateEvent[];
}

interface RemoteRequest {
  readonly req: RequestInfo;
  readonly backend: string;
}

interface RemoteRouter {
  lastSeen: number;
  seq: number;
  /** Its requests in flight, oldest first (Map order). */
  readonly open: Map<string, RemoteRequest>;
  /** Per backend: open requests. */
  readonly counts: Map<string, number>;
  /** Per backend: requests its heartbeat counts that no push of it told us of. */
  readonly unknown: Map<string, number>;
}

const isStr = (v: unknown): v is string => typeof v === 'string';
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const optNum = (v: unknown): boolean => v === undefined || isNum(v);
const optStr = (v: unknown): boolean => v === undefined || isStr(v);

function isEvent(e: unknown): e is StateEvent {
  if (typeof e !== 'object' || e === null) return false;
  const o = e as Record<string, unknown>;
  if (!isStr(o.id) || !isStr(o.b)) return false;
  if (o.k === 'd')
    return (
      isStr(o.m) &&
      isStr(o.a) &&
      isNum(o.t) &&
      isStr(o.p) &&
      isNum(o.n) &&
      o.n >= o.p.length &&
      o.n <= 1e8 &&
      optNum(o.x) &&
      optStr(o.sk) &&
      optStr(o.th)
    );
  if (o.k === 'c')
    return (
      typeof o.ok === 'boolean' &&
      isNum(o.da) &&
      optNum(o.fa) &&
      (o.fw === undefined || typeof o.fw === 'boolean') &&
      isNum(o.fi) &&
      optNum(o.pt) &&
      optNum(o.ct) &&
      optNum(o.pe) &&
      optNum(o.ev) &&
      optNum(o.ca)
    );
  return false;
}

/** A payload as a batch, or undefined when anything in it is not what a router sends. */
export function parseBatch(payload: string): Batch | undefined {
  let v: unknown;
  try {
    v = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const o = v as Record<string, unknown>;
  if (o.v !== 1 || !isStr(o.r) || !isNum(o.s) || !Array.isArray(o.e) || !optNum(o.w)) return undefined;
  if (o.c !== undefined) {
    if (typeof o.c !== 'object' || o.c === null || Array.isArray(o.c)) return undefined;
    for (const n of Object.values(o.c)) if (!isNum(n) || n < 0) return undefined;
  }
  if (!o.e.every(isEvent)) return undefined;
  return v as Batch;
}

const API_KINDS: ReadonlySet<string> = new Set(['ollama', 'openai']);

/**
 * Batches through Redis pub/sub on `<prefix>:shared-state`: `pub` publishes (a connection that
 * may also run commands), `sub` is given over to the subscription (ioredis resubscribes after a
 * reconnect). Neither queues while disconnected (enableOfflineQueue false): a batch then fails.
 */
export function redisStateTransport(
  pub: { publish(channel: string, message: string): Promise<number> },
  sub: {
    readonly status: string;
    subscribe(channel: string): Promise<unknown>;
    on(event: 'message', cb: (channel: string, message: string) => void): unknown;
    on(event: 'ready', cb: () => void): unknown;
    disconnect(): void;
  },
  prefix: string,
): StateTransport {
  const channel = `${prefix}:shared-state`;
  return {
    publish: (payload) => pub.publish(channel, payload),
    subscribe: (onMessage) => {
      sub.on('message', (ch, message) => {
        if (ch === channel) onMessage(message);
      });
      // (Re)subscribed whenever the connection is ready: Redis may be down at start or restart.
      const join = (): void => void sub.subscribe(channel).catch(() => undefined);
      sub.on('ready', join);
      if (sub.status === 'ready') join();
    },
    close: () => sub.disconnect(),
  };
}

export class SharedState {
  readonly stats: SharedStateStats = {
    published: 0,
    publishedBytes: 0,
    publishFailures: 0,
    received: 0,
    receivedBytes: 0,
    malformed: 0,
    dropped: 0,
    gaps: 0,
    unmatched: 0,
    expired: 0,
    departed: 0,
    remoteDispatched: 0,
    reconciled: 0,
    lagMsSum: 0,
    lagMsMax: 0,
  };
  private readonly o: Required<Omit<SharedStateOptions, 'hostNow'>>;
  private readonly hostNow: () => number;
  private pending: StateEvent[] = [];
  private flushQueued = false;
  private inFlightPublishes = 0;
  private seq = 0;
  private lastSent = -Infinity;
  /** This router's pushes published and not yet answered, per backend (what heartbeats say). */
  private readonly mine = new Map<string, number>();
  private readonly remotes = new Map<string, RemoteRouter>();
  /** Remote requests remembered, all routers together. */
  private remoteCount = 0;
  /** Per backend: the others' requests in flight there (pushes heard, not yet answered). */
  private readonly othersIn = new Map<string, number>();
  /** Per backend: the others' pushes and answers since this router last read engine metrics. */
  private readonly sinceMap = new Map<string, { dispatched: number; completed: number }>();
  /** Routers the transport said were gone: a late batch of theirs is ignored (bounded, oldest go). */
  private readonly departed = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private lastPublishOk = true;

  constructor(
    private readonly transport: StateTransport,
    private readonly host: SharedStateHost,
    opts: SharedStateOptions,
  ) {
    this.o = {
      routerId: opts.routerId,
      promptChars: opts.promptChars ?? 32_768,
      heartbeatMs: opts.heartbeatMs ?? 200,
      ttlMs: opts.ttlMs ?? 1500,
      maxPending: opts.maxPending ?? 10_000,
      maxInFlightPublishes: opts.maxInFlightPublishes ?? 64,
      maxRemoteRequests: opts.maxRemoteRequests ?? 100_000,
      timeOrigin: opts.timeOrigin ?? performance.timeOrigin,
    };
    this.hostNow = opts.hostNow ?? (() => performance.now());
  }

  get routerId(): string {
    return this.o.routerId;
  }

  /** Whether the last publish went out (false while the transport is away). */
  get up(): boolean {
    return this.lastPublishOk;
  }

  /** Other routers heard from within ttlMs. */
  get liveRouters(): number {
    return this.remotes.size;
  }

  start(): void {
    if (this.timer || this.closed) return;
    this.transport.subscribe((p) => this.receive(p));
    this.transport.gone?.((id) => this.forget(id));
    this.timer = setInterval(() => this.tick(), Math.max(10, Math.floor(this.o.heartbeatMs / 2)));
    this.timer.unref();
  }

  stop(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.transport.close();
  }

  /** The other routers' requests in flight, all backends, as heard. */
  get othersInFlight(): number {
    let n = 0;
    for (const c of this.othersIn.values()) n += c;
    for (const r of this.remotes.values()) for (const c of r.unknown.values()) n += c;
    return n;
  }

  /**
   * A router is gone (its process exited): its requests are answered (failed) to the policy and
   * leave the counts now; batches of it still in transit are ignored.
   */
  forget(routerId: string): void {
    if (this.closed || routerId === this.o.routerId) return;
    this.departed.add(routerId);
    if (this.departed.size > 1000) this.departed.delete(this.departed.values().next().value!);
    const r = this.remotes.get(routerId);
    if (!r) return;
    this.stats.departed++;
    const changed = new Set<string>();
    this.dropRouter(routerId, r, changed);
    if (changed.size > 0) this.host.changed(changed);
  }

  /** The other routers' requests in flight on a backend, as heard. */
  readonly othersOf = (backend: string): number => {
    let n = this.othersIn.get(backend) ?? 0;
    for (const r of this.remotes.values()) n += r.unknown.get(backend) ?? 0;
    return n;
  };

  /** The others' pushes and answers on a backend since resetSince (engine metrics read since). */
  readonly othersSince = (backend: string): { readonly dispatched: number; readonly completed: number } =>
    this.sinceMap.get(backend) ?? NONE;

  /** The engine's metrics were read: they count what every router pushed before. */
  resetSince(backend: string): void {
    this.sinceMap.delete(backend);
  }

  private wall(t: number): number {
    return this.o.timeOrigin + t;
  }

  private local(wall: number): number {
    return wall - this.o.timeOrigin;
  }

  /** This router pushed `req` to `backend` (after its policy saw it). */
  published(req: RequestInfo, backend: string): void {
    this.mine.set(backend, (this.mine.get(backend) ?? 0) + 1);
    const text = req.promptText;
    this.enqueue({
      k: 'd',
      id: req.id,
      b: backend,
      m: req.model,
      a: req.api,
      t: this.wall(req.arrivedAt),
      p: text.length > this.o.promptChars ? text.slice(0, this.o.promptChars) : text,
      n: text.length,
      ...(req.maxTokens !== undefined ? { x: req.maxTokens } : {}),
      ...(req.sessionKey !== undefined ? { sk: req.sessionKey } : {}),
      ...(req.taskHint !== undefined ? { th: req.taskHint } : {}),
    });
  }

  /** A request of this router ended (after its policy saw it). */
  answered(req: RequestInfo, backend: string, r: CompletionReport): void {
    const n = (this.mine.get(backend) ?? 0) - 1;
    if (n > 0) this.mine.set(backend, n);
    else this.mine.delete(backend);
    this.enqueue({
      k: 'c',
      id: req.id,
      b: backend,
      ok: r.ok,
      da: this.wall(r.dispatchedAt),
      ...(r.firstByteAt !== undefined ? { fa: this.wall(r.firstByteAt) } : {}),
      ...(r.firstByteIsWholeAnswer ? { fw: true } : {}),
      fi: this.wall(r.finishedAt),
      ...(r.promptTokens !== undefined ? { pt: r.promptTokens } : {}),
      ...(r.completionTokens !== undefined ? { ct: r.completionTokens } : {}),
      ...(r.promptEvalMs !== undefined ? { pe: r.promptEvalMs } : {}),
      ...(r.evalMs !== undefined ? { ev: r.evalMs } : {}),
      ...(r.cachedTokens !== undefined ? { ca: r.cachedTokens } : {}),
    });
  }

  private enqueue(e: StateEvent): void {
    if (this.closed) return;
    this.pending.push(e);
    if (this.pending.length > this.o.maxPending) {
      const over = this.pending.length - this.o.maxPending;
      this.pending.splice(0, over);
      this.stats.dropped += over;
    }
    if (!this.flushQueued) {
      this.flushQueued = true;
      setImmediate(() => {
        this.flushQueued = false;
        this.flush(false);
      });
    }
  }

  /** Sends what is pending (and this router's counts when `heartbeat`). */
  private flush(heartbeat: boolean): void {
    if (this.closed) return;
    if (this.pending.length === 0 && !heartbeat) return;
    if (this.inFlightPublishes >= this.o.maxInFlightPublishes) return; // kept (bounded) for later
    const e = this.pending;
    this.pending = [];
    const batch: Batch = {
      v: 1,
      r: this.o.routerId,
      s: ++this.seq,
      w: this.wall(this.hostNow()),
      ...(heartbeat ? { c: Object.fromEntries(this.mine) } : {}),
      e,
    };
    const payload = JSON.stringify(batch);
    this.lastSent = this.hostNow();
    this.inFlightPublishes++;
    const done = (ok: boolean): void => {
      this.inFlightPublishes--;
      this.lastPublishOk = ok;
      if (ok) {
        this.stats.published++;
        this.stats.publishedBytes += payload.length;
      } else this.stats.publishFailures++;
    };
    try {
      const p = this.transport.publish(payload);
      if (p && typeof (p as Promise<unknown>).then === 'function')
        (p as Promise<unknown>).then(
          () => done(true),
          () => done(false),
        );
      else done(true);
    } catch {
      done(false);
    }
  }

  /** Heartbeat (with counts) when due; routers silent for ttlMs are dropped. */
  tick(): void {
    const t = this.hostNow();
    if (t - this.lastSent >= this.o.heartbeatMs) this.flush(true);
    else if (this.pending.length > 0) this.flush(false);
    const changed = new Set<string>();
    for (const [id, r] of this.remotes)
      if (t - r.lastSeen >= this.o.ttlMs) {
        this.stats.expired++;
        this.dropRouter(id, r, changed);
      }
    if (changed.size > 0) this.host.changed(changed);
  }

  private dropRouter(id: string, r: RemoteRouter, changed: Set<string>): void {
    for (const [rid, q] of r.open) this.endRemote(r, rid, q, undefined, changed);
    for (const b of r.unknown.keys()) changed.add(b);
    this.remotes.delete(id);
  }

  /** A remote request leaves the counts; the policy hears its answer (failed when `report` is absent). */
  private endRemote(
    r: RemoteRouter,
    rid: string,
    q: RemoteRequest,
    report: CompletionReport | undefined,
    changed: Set<string>,
  ): void {
    r.open.delete(rid);
    this.remoteCount--;
    const c = (r.counts.get(q.backend) ?? 1) - 1;
    if (c > 0) r.counts.set(q.backend, c);
    else r.counts.delete(q.backend);
    const o = (this.othersIn.get(q.backend) ?? 1) - 1;
    if (o > 0) this.othersIn.set(q.backend, o);
    else this.othersIn.delete(q.backend);
    changed.add(q.backend);
    const view = this.host.backend(q.backend);
    if (!view) return;
    const since = this.sinceOf(q.backend);
    since.completed++;
    const now = this.hostNow();
    this.host.remoteComplete(q.req, view, report ?? { ok: false, dispatchedAt: now, finishedAt: now });
  }

  private sinceOf(b: string): { dispatched: number; completed: number } {
    let s = this.sinceMap.get(b);
    if (!s) this.sinceMap.set(b, (s = { dispatched: 0, completed: 0 }));
    return s;
  }

  /** One payload from the transport. */
  receive(payload: string): void {
    if (this.closed) return;
    const batch = parseBatch(payload);
    if (!batch) {
      this.stats.malformed++;
      return;
    }
    if (batch.r === this.o.routerId || this.departed.has(batch.r)) return;
    this.stats.received++;
    this.stats.receivedBytes += payload.length;
    const t = this.hostNow();
    if (batch.w !== undefined) {
      const lag = Math.max(0, this.wall(t) - batch.w);
      this.stats.lagMsSum += lag;
      if (lag > this.stats.lagMsMax) this.stats.lagMsMax = lag;
    }
    let r = this.remotes.get(batch.r);
    if (!r) {
      r = { lastSeen: t, seq: batch.s, open: new Map(), counts: new Map(), unknown: new Map() };
      this.remotes.set(batch.r, r);
    } else {
      if (batch.s > r.seq + 1) this.stats.gaps++;
      r.seq = batch.s;
      r.lastSeen = t;
    }
    const changed = new Set<string>();
    for (const e of batch.e) {
      if (e.k === 'd') this.applyDispatch(batch.r, r, e, changed);
      else {
        const q = r.open.get(e.id);
        if (!q) {
          this.stats.unmatched++;
          continue;
        }
        this.endRemote(r, e.id, q, this.report(e), changed);
      }
    }
    if (batch.c) this.reconcile(r, batch.c, changed);
    if (changed.size > 0) this.host.changed(changed);
  }

  private report(e: CompleteEvent): CompletionReport {
    return {
      ok: e.ok,
      dispatchedAt: this.local(e.da),
      firstByteAt: e.fa === undefined ? undefined : this.local(e.fa),
      firstByteIsWholeAnswer: e.fw,
      finishedAt: this.local(e.fi),
      promptTokens: e.pt,
      completionTokens: e.ct,
      promptEvalMs: e.pe,
      evalMs: e.ev,
      cachedTokens: e.ca,
    };
  }

  private applyDispatch(router: string, r: RemoteRouter, e: DispatchEvent, changed: Set<string>): void {
    const view = this.host.backend(e.b);
    if (!view || r.open.has(e.id)) return; // a backend this router does not have; a duplicate
    // Bounded: the oldest remote request is forgotten (as answered) to make room.
    if (this.remoteCount >= this.o.maxRemoteRequests) {
      for (const rr of this.remotes.values()) {
        const first = rr.open.entries().next();
        if (!first.done) {
          this.endRemote(rr, first.value[0], first.value[1], undefined, changed);
          break;
        }
      }
    }
    const req: RequestInfo = {
      // Another router's ids may equal this router's own: its policy keeps requests by id.
      id: `${router}/${e.id}`,
      model: e.m,
      api: API_KINDS.has(e.a) ? (e.a as RequestInfo['api']) : 'openai',
      arrivedAt: this.local(e.t),
      promptText: e.n > e.p.length ? e.p + ' '.repeat(e.n - e.p.length) : e.p,
      maxTokens: e.x,
      sessionKey: e.sk,
      taskHint: e.th,
    };
    r.open.set(e.id, { req, backend: e.b });
    this.remoteCount++;
    r.counts.set(e.b, (r.counts.get(e.b) ?? 0) + 1);
    this.othersIn.set(e.b, (this.othersIn.get(e.b) ?? 0) + 1);
    this.sinceOf(e.b).dispatched++;
    this.stats.remoteDispatched++;
    changed.add(e.b);
    this.host.remoteDispatch(req, view);
  }

  /**
   * A heartbeat's counts, sent after every event before it: what we hold of that router should
   * equal them. More: answers were lost (the oldest requests are ended); fewer: pushes were lost
   * (counted as unknown until the next heartbeat).
   */
  private reconcile(r: RemoteRouter, counts: Record<string, number>, changed: Set<string>): void {
    const before = new Map(r.unknown);
    r.unknown.clear();
    const names = new Set([...r.counts.keys(), ...Object.keys(counts)]);
    for (const b of names) {
      const want = Object.prototype.hasOwnProperty.call(counts, b) ? counts[b]! : 0;
      let have = r.counts.get(b) ?? 0;
      if (have > want) {
        for (const [rid, q] of r.open) {
          if (have <= want) break;
          if (q.backend !== b) continue;
          this.stats.reconciled++;
          this.endRemote(r, rid, q, undefined, changed);
          have--;
        }
      } else if (have < want && this.host.backend(b)) r.unknown.set(b, want - have);
      if ((before.get(b) ?? 0) !== (r.unknown.get(b) ?? 0)) changed.add(b);
    }
  }
}

const NONE = { dispatched: 0, completed: 0 } as const;
