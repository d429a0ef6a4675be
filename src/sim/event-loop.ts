/**
 * The simulator's one event loop (issue #31: one simulator): the virtual clock, the event heap,
 * the engine fleet's wakes, the opening requests' cursor, periodic events (probes, samples, peer
 * statuses, syncs) and the lazy-wake protocol. Every run drives it: one router (simulator.ts) is
 * the one-node case of several (federation.ts). A host (LoopHost) handles its own events — sends,
 * arrivals, timeouts, shares — and each engine finish; the loop owns when things happen.
 *
 * Same-instant order: events run by (time, priority, insertion order). Event kinds double as
 * priorities: sends (and forwarded arrivals) reach an engine before its iteration boundary at that
 * instant is processed (the engine model admits what was submitted at or before an iteration's
 * start), finishes beat a client timeout at the same instant, probes and samples see the instant's
 * end state, shared state published at an instant reaches the others after it.
 *
 * Lazy wakes (simulate's default): an engine is woken only where its next iteration may finish,
 * admit or preempt a sequence; the quiet iterations before run inside advance(), and an engine is
 * brought up to the present before anything submits to, cancels on or reads it (submit, cancel,
 * catchUpAll). Where two engine events at one instant meet and their order decides the results,
 * the loop throws AmbiguousOrder: the caller reruns with every iteration woken (the reference
 * protocol). Without lazy wakes a lone engine's back-to-back iterations are taken in place (no
 * heap push and pop per iteration; the same events in the same order).
 */
import type { EngineEvent } from '../engine/types.js';
import type { ScenarioBackend } from '../scenario/types.js';
import type { ScheduledRequest, WorkloadRequest } from '../workloads/types.js';
import { EngineFleet, type OpenRequest, type SubmitArgs } from './engine-fleet.js';
import { EventHeap } from './event-heap.js';

// Event kinds, in same-instant priority order (see the header).
export const SEND = 0;
/** A request forwarded by a peer router reaching it. */
export const ARRIVE = 1;
export const ENGINE = 2;
export const TIMEOUT = 3;
/** A peer router's status reaching a router (and the peer-probe tick). */
export const PEER = 4;
export const PROBE = 5;
export const SYNC = 6;
export const SAMPLE = 7;
/** Shared state one router published reaching the others. */
export const SHARE = 8;

/** A periodic event: run every `every` virtual seconds from 0 while the run is active. */
export interface Tick {
  readonly every: number;
  readonly run: () => void;
}

/** What the loop reads of an event; a host's events add their own fields. */
export interface LoopEvent {
  readonly kind: number;
  /** ENGINE: the engine index. */
  readonly backend?: number;
  /** A periodic event. */
  readonly tick?: Tick;
}

/** An engine's finish event. */
export type Finished = Extract<EngineEvent, { type: 'finished' }>;

/** What a run (one router or several) does with the loop's events. */
export interface LoopHost<E extends LoopEvent> {
  /** An opening request, read by the cursor, sent at `loop.now`. */
  open(req: WorkloadRequest): void;
  /** One of the host's own events (SEND, ARRIVE, TIMEOUT, PEER, SHARE) at `loop.now`. */
  handle(ev: E): void;
  /** Engine i finished a request (at `e.t`, the present). */
  finished(i: number, e: Finished): void;
  /** Whether the routers still hold work (in flight, queued, between routers). */
  busy(): boolean;
  /** After every event, before the instant's engine wakes are set (undefined: nothing). */
  readonly afterEvent?: () => void;
}

/**
 * Lazy wakes met an ordering only the reference protocol knows: two engine events at one instant
 * whose order decides the results. The caller reruns with lazy wakes off.
 */
export class AmbiguousOrder extends Error {}

const f64 = new Float64Array(1);
// The double's bits as two 32-bit halves (BigInt arithmetic on a 64-bit view allocates per call).
const u32 = new Uint32Array(f64.buffer);
const LO = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 0 : 1;
const HI = 1 - LO;
/** The largest double below x (x > 0): its bits minus one. */
function justBefore(x: number): number {
  f64[0] = x;
  if (u32[LO] === 0) {
    u32[LO] = 0xffffffff;
    u32[HI]!--;
  } else u32[LO]!--;
  return f64[0]!;
}

/** Most iterations an engine runs between wakes under lazy wakes (bounds quietUntil's loop). */
const MAX_QUIET_ITERATIONS = 4096;

export interface EventLoopOptions {
  readonly seed: number;
  /** durationS: nothing is sent at or after it. */
  readonly durationS: number;
  /** durationS + graceS: the run is cut off after it. */
  readonly endS: number;
  readonly lazy: boolean;
}

export class EventLoop<E extends LoopEvent> {
  /** The virtual clock, seconds. */
  now = 0;
  /** The last send, arrival or engine event. */
  lastActivity = 0;
  readonly heap = new EventHeap<E>();
  readonly fleet: EngineFleet<E>;
  readonly lazy: boolean;
  readonly endS: number;
  private readonly durationS: number;
  /** Sends on the heap. */
  private pendingSends = 0;
  /** The opening requests' cursor and its head (see setOpening). */
  private opening: () => ScheduledRequest | undefined = () => undefined;
  private first: ScheduledRequest | undefined = undefined;
  /** Lazy wakes: per engine, the instant its last wake was processed. */
  private readonly wokenAt: number[];
  /** Lazy wakes: at the current instant, an engine event / a later-priority event has been processed. */
  private engineSeen = false;
  private lateSeen = false;
  /** The engine whose wake is being processed (-1: none). */
  private current = -1;
  private host: LoopHost<E> | undefined;

  constructor(specs: readonly ScenarioBackend[], opts: EventLoopOptions) {
    this.fleet = new EngineFleet<E>(
      specs,
      this.heap,
      ENGINE,
      (i) => ({ kind: ENGINE, backend: i }) as E,
      opts.seed,
    );
    this.lazy = opts.lazy;
    this.endS = opts.endS;
    this.durationS = opts.durationS;
    this.wokenAt = specs.map(() => -1);
  }

  /**
   * Read the opening requests (all of an open-loop workload) by a cursor in time order, not as
   * heap entries: the heap then holds only engine wakes, follow-ups, timeouts and periodic events,
   * so it stays small. Equal times beat heap events at the same instant, as their SEND priority
   * and earlier insertion would.
   */
  setOpening(opening: () => ScheduledRequest | undefined): void {
    this.opening = opening;
    this.first = opening();
  }

  /** Put the driver's requests sent before durationS on the heap (`make`: their event). */
  schedule(items: readonly ScheduledRequest[], make: (it: ScheduledRequest) => E): void {
    for (let k = 0; k < items.length; k++) {
      const it = items[k]!;
      // Nothing is sent at or after durationS (the run then only drains).
      if (!(it.at < this.durationS)) continue;
      this.pendingSends++;
      this.heap.push(Math.max(it.at, this.now), SEND, make(it));
    }
  }

  /** Run `tick` at 0 and every `tick.every` after while active (never when not finite). */
  every(priority: number, tick: Tick): void {
    if (Number.isFinite(tick.every)) this.heap.push(0, priority, { kind: priority, tick } as E);
  }

  /** Anything left to happen: sends, wakes, or work the routers hold. */
  active(): boolean {
    return this.pendingSends > 0 || this.first !== undefined || this.fleet.liveWakes > 0 || this.host!.busy();
  }

  /** Submit what the fleet prepared to engine i at now (a lazy engine brought to the present first). */
  submit(o: OpenRequest, i: number, args: SubmitArgs): void {
    if (this.lazy) this.beforeSubmit(i);
    this.fleet.submit(o, i, args, this.now);
  }

  /** Take `o` off its engine at now. */
  cancel(o: OpenRequest): void {
    if (this.lazy) this.catchUp(o.engine, true);
    this.fleet.cancel(o, this.now);
  }

  /** Bring every lazy engine to the present (before reading engine state at now). */
  catchUpAll(): void {
    if (!this.lazy) return;
    for (let i = 0; i < this.fleet.engines.length; i++) this.catchUp(i, true);
  }

  /** Run to the end; true when cut off at endS with events left. */
  run(host: LoopHost<E>): boolean {
    this.host = host;
    const { heap, fleet, endS } = this;
    const after = host.afterEvent;
    for (;;) {
      const ht = heap.peekTime();
      const head = this.first;
      const fromList = head !== undefined && (ht === undefined || Math.max(0, head.at) <= ht);
      const t = fromList ? Math.max(0, head.at) : ht;
      if (t === undefined) return false;
      if (t > endS) return true;
      if (t !== this.now) {
        this.engineSeen = false;
        this.lateSeen = false;
      }
      this.now = t;
      if (fromList) {
        this.first = this.opening();
        this.lastActivity = t;
        host.open(head.request);
      } else {
        const ev = heap.pop()!;
        const kind = ev.kind;
        if (kind === ENGINE) this.onWake(ev.backend!, after);
        else if (ev.tick !== undefined) {
          this.lateSeen = true;
          ev.tick.run();
          // Periodic events only matter while something is pending; an idle run ends.
          if (this.active()) heap.push(this.now + ev.tick.every, kind, ev);
        } else {
          if (kind === SEND) this.pendingSends--;
          if (kind < ENGINE) this.lastActivity = t;
          else this.lateSeen = true;
          host.handle(ev);
        }
      }
      if (after !== undefined) after();
      if (fleet.dirtyCount > 0) this.flushIfInstantOver();
    }
  }

  /** Cut off: the reference protocol ran every iteration up to the end; lazy engines catch up. */
  catchUpToEnd(): void {
    if (!this.lazy) return;
    this.now = this.endS;
    this.catchUpAll();
  }

  private onWake(b: number, after: (() => void) | undefined): void {
    const fleet = this.fleet;
    if (fleet.wakeAt[b] !== this.now) return; // superseded
    this.lastActivity = this.now;
    if (this.lazy) {
      // Two engines woken at one instant: their order was the reference protocol's push order.
      if (this.engineSeen) throw new AmbiguousOrder();
      this.engineSeen = true;
      this.wokenAt[b] = this.now;
      this.current = b;
      this.wake(b);
      this.current = -1;
      return;
    }
    this.wake(b);
    // While this engine alone is touched and its next iteration end is strictly the run's next
    // event, take that wake here: flush would push it and the loop pop it at once, so this is the
    // same events in the same order, minus a heap push and pop per iteration.
    const heap = this.heap;
    for (;;) {
      if (after !== undefined) after();
      if (!(fleet.dirtyCount === 1 && fleet.dirtyList[0] === b)) return;
      const ht = heap.peekTime() ?? Infinity;
      const next = this.first !== undefined ? Math.max(0, this.first.at) : Infinity;
      if (!(ht > this.now && next > this.now)) return; // the instant is not over
      const t = fleet.engines[b]!.nextEventTime();
      if (t === undefined || !(t < ht && t < next) || t > this.endS) return;
      fleet.dirty[b] = false;
      fleet.dirtyCount = 0;
      fleet.wakeAt[b] = t;
      fleet.liveWakes++;
      this.now = t;
      this.lastActivity = t;
      this.wake(b);
    }
  }

  /** Process engine i's wake at now: its events up to now, each finish to the host. */
  private wake(i: number): void {
    this.fleet.woken(i);
    const now = this.now;
    const events = this.fleet.engines[i]!.advance(now);
    for (let k = 0; k < events.length; k++) {
      const e = events[k]!;
      if (e.type !== 'finished') continue;
      if (this.lazy && e.t !== now) this.missedFinish(i, e);
      this.host!.finished(i, e);
    }
  }

  /** Set the touched engines' wakes once no more events remain at the current instant. */
  private flushIfInstantOver(): void {
    const ht = this.heap.peekTime();
    const next = this.first?.at;
    if ((ht === undefined || ht > this.now) && (next === undefined || next > this.now))
      this.fleet.flush(this.lazy, MAX_QUIET_ITERATIONS);
  }

  /**
   * Lazy wakes: run engine i's iterations that end before now (`inclusive`: at now too, as events
   * of a later priority than engine wakes see it). A pending start at now is left to the instant's
   * flush, as the reference protocol leaves it. A finish here means quietUntil missed one.
   */
  private catchUp(i: number, inclusive: boolean): void {
    const e = this.fleet.engines[i]!;
    const now = this.now;
    if (now > 0) this.check(i, e.advance(justBefore(now)));
    if (inclusive && e.iterationEnd === now) this.check(i, e.advance(now));
  }

  private check(i: number, events: readonly EngineEvent[]): void {
    for (let k = 0; k < events.length; k++) {
      const ev = events[k]!;
      if (ev.type === 'finished') this.missedFinish(i, ev);
    }
  }

  private missedFinish(i: number, ev: Finished): never {
    throw new Error(
      `simulator: ${this.fleet.specs[i]!.name} finished ${ev.id} at ${ev.t} s, between wakes (EngineModel.quietUntil out of step with its iterations?)`,
    );
  }

  /** Lazy wakes: bring engine i to the present before a request is submitted to it. */
  private beforeSubmit(i: number): void {
    if (this.lateSeen) return this.catchUp(i, true);
    this.catchUp(i, false);
    // Submitted while same-instant engine events run: whether i's iteration ending now comes first
    // depended on the reference protocol's push order.
    if (
      this.engineSeen &&
      i !== this.current &&
      (this.wokenAt[i] === this.now || this.fleet.engines[i]!.iterationEnd === this.now)
    )
      throw new AmbiguousOrder();
  }
}
