/**
 * How the scheduler's pump starts walking a waiting group (issue #33: moved out of scheduler.ts as
 * it was): its first member and offer order (FIFO, response ratio, or only those a fit gate lets
 * through), the candidates it is offered to, and the response-ratio heaps, walks and sizing
 * scratch reused from pump to pump. The Scheduler (scheduler.ts) owns one and drives the pump.
 */
import type { FitGate, RequestInfo, ResponseRatioOrder } from './types.js';
import { GatedWalk } from './scheduler-fit.js';
import type { Fleet } from './scheduler-fleet.js';
import { RatioHeap, RatioIndex, RatioWalk, ratioOf, type RatioOrder } from './scheduler-ratio.js';
import { heapPush, type BackendState, type Cursor, type Group, type Queued } from './scheduler-state.js';

/** Cursors of groups not probed for a hold start with none (gathered at their first offer). */
const NO_CANDIDATES: BackendState[] = [];

/** FitGate.bound of the cursor's candidates, computed once per candidate list. */
export function boundOf(c: Cursor, gate: FitGate, now: number): number {
  if (c.boundAt !== c.dispatchesAt) {
    c.bound = gate.bound(c.candidates, now);
    c.boundAt = c.dispatchesAt;
  }
  return c.bound;
}

export class PumpCursors {
  /** The pump's cursors in offer order (a heap; reused). */
  readonly heap: Cursor[] = [];
  /** start's candidates while the policy is asked whether it holds them all (reused). */
  private readonly probeCandidates: BackendState[] = [];
  /** Response-ratio heaps and walks kept for reuse; the first `…InUse` belong to the running pump. */
  private readonly ratioHeaps: RatioHeap[] = [];
  private ratioHeapsInUse = 0;
  private readonly ratioWalks: RatioWalk[] = [];
  private ratioWalksInUse = 0;
  /** Numbers the ratio walks (Queued.walk). */
  private walkStamp = 0;
  /** sizeMembers' scratch: the members it sizes, their requests, and the sizes. */
  private readonly sizeBatch: Queued[] = [];
  private readonly sizeReqs: RequestInfo[] = [];
  private sizeOut = new Float64Array(64);

  constructor(
    private readonly fleet: Fleet,
    /** Members a response-ratio ordering sorts exactly up front (RatioWalk). */
    private readonly ratioWalkCandidates: number,
  ) {}

  /** A new pump: the heaps and walks are free again. */
  reset(): void {
    this.ratioHeapsInUse = 0;
    this.ratioWalksInUse = 0;
  }

  /**
   * The cursor's candidates as of `pushes` pushes into the pump: within a pump only a push changes
   * who is below its cap, so they are gathered again after one, not for every member offered.
   */
  candidatesAt(c: Cursor, pushes: number): void {
    if (c.dispatchesAt === pushes) return;
    c.candidates = []; // a new array: a policy may keep the last one
    this.fleet.gatherCandidates(this.fleet.servingOf(c.group), c.group.exclude, c.candidates);
    c.dispatchesAt = pushes;
  }

  /** Starts walking the group's members, or only `single` (one that joined), in offer order. */
  start(
    g: Group,
    single: Queued | undefined,
    rr: ResponseRatioOrder | undefined,
    gate: FitGate | undefined,
    epoch: number,
    now: number,
  ): void {
    const heap = this.heap;
    const eligible = this.fleet.hasEligible(this.fleet.servingOf(g), g.exclude);
    let candidates: BackendState[] = NO_CANDIDATES;
    let dispatchesAt = -1;
    if (gate && eligible && !rr && single === undefined && g.gated > 0 && g.gated === g.members.size) {
      this.startGated(g, gate, now);
      return;
    }
    if (rr && eligible) {
      // Ordering costs a pass over the group: skip it when none of them could go now anyway.
      const probe = this.probeCandidates;
      this.fleet.gatherCandidates(this.fleet.servingOf(g), g.exclude, probe);
      if (probe.length === 0 || rr.holdsAll?.(probe) === true) {
        g.allHeld = true;
        return;
      }
      // Nothing was pushed in this pump yet (cursors start before any offer): still current.
      candidates = probe.slice();
      dispatchesAt = 0;
    }
    let order: RatioOrder | undefined;
    if (rr === undefined) order = undefined;
    else if (single === undefined) order = this.ratioOrder(g, rr, epoch, now);
    else {
      this.sizeMember(single, rr, epoch);
      const h = this.ratioHeap();
      h.add(single, ratioOf(single, now));
      order = h.build();
    }
    let rest: Iterator<Queued> | undefined;
    let first: Queued | undefined;
    let key = 0;
    if (order !== undefined) {
      first = order.pop();
      key = order.poppedKey;
    } else if (single !== undefined) first = single;
    else {
      rest = g.members.values();
      const next = rest.next();
      first = next.done ? undefined : next.value;
    }
    if (first !== undefined)
      heapPush(heap, {
        group: g,
        at: first,
        key,
        rest,
        order,
        eligible,
        candidates,
        dispatchesAt,
        bound: NaN,
        boundAt: -1,
      });
  }

  /**
   * A group whose every member is held until it fits: only those at or below the candidates'
   * bound are walked (in arrival order); none when the smallest is above it.
   */
  private startGated(g: Group, gate: FitGate, now: number): void {
    const probe = this.probeCandidates;
    this.fleet.gatherCandidates(this.fleet.servingOf(g), g.exclude, probe);
    if (probe.length === 0) {
      g.allHeld = true; // as offering its first member would find: no backend below its cap
      return;
    }
    const bound = gate.bound(probe, now);
    const fits = g.gate!;
    if (!fits.hasAtMost(bound)) return;
    const first = fits.firstAtMost(bound, -Infinity)!;
    const walk = new GatedWalk(fits, first.seq);
    // Nothing was pushed in this pump yet (cursors start before any offer): still current.
    const c: Cursor = {
      group: g,
      at: first,
      key: 0,
      rest: walk,
      order: undefined,
      eligible: true,
      candidates: probe.slice(),
      dispatchesAt: 0,
      bound,
      boundAt: 0,
    };
    walk.cursor = c;
    heapPush(this.heap, c);
  }

  /**
   * The group's members in response-ratio order at `now`, every one sized in `epoch` first (in
   * arrival order): all of them when the epoch moved, else those that joined since.
   */
  private ratioOrder(g: Group, rr: ResponseRatioOrder, epoch: number, now: number): RatioOrder {
    let index = g.ratio;
    if (index === undefined) {
      index = g.ratio = new RatioIndex();
      for (const q of g.members.values()) index.add(q);
      index.joined.length = 0;
    }
    if (index.sizedEpoch !== epoch) {
      // Every member, in arrival order (a Map iterates in insertion order).
      const batch = this.sizeBatch;
      let n = 0;
      for (const q of g.members.values()) if (q.sizeEpoch !== epoch) batch[n++] = q;
      this.sizeMembers(n, rr, epoch);
      index.sizedEpoch = epoch;
    } else if (index.joined.length > 0) {
      const batch = this.sizeBatch;
      const joined = index.joined;
      let n = 0;
      for (let i = 0; i < joined.length; i++) {
        const q = joined[i]!;
        if (q.slot >= 0 && q.sizeEpoch !== epoch) batch[n++] = q;
      }
      this.sizeMembers(n, rr, epoch);
    }
    index.joined.length = 0;
    if (this.ratioWalksInUse === this.ratioWalks.length)
      this.ratioWalks.push(new RatioWalk(this.ratioWalkCandidates));
    const walk = this.ratioWalks[this.ratioWalksInUse++]!;
    if (walk.start(index, ++this.walkStamp, now)) return walk;
    // A ratio that is not a finite number: order every member by it exactly, in arrival order.
    const h = this.ratioHeap();
    for (const q of g.members.values()) h.add(q, ratioOf(q, now));
    return h.build();
  }

  /**
   * Sizes sizeBatch's first n members (not sized in `epoch`, queued, in arrival order): all at
   * once when the policy can (ResponseRatioOrder.sizes).
   */
  private sizeMembers(n: number, rr: ResponseRatioOrder, epoch: number): void {
    const batch = this.sizeBatch;
    if (rr.sizes === undefined) {
      for (let i = 0; i < n; i++) this.sizeMember(batch[i]!, rr, epoch);
      return;
    }
    if (n === 0) return;
    const reqs = this.sizeReqs;
    reqs.length = n;
    for (let i = 0; i < n; i++) reqs[i] = batch[i]!.req;
    if (this.sizeOut.length < n) this.sizeOut = new Float64Array(n * 2);
    const out = this.sizeOut;
    rr.sizes(reqs, out);
    for (let i = 0; i < n; i++) {
      const q = batch[i]!;
      const s = out[i]!;
      q.size = Number.isFinite(s) && s > 0 ? s : 1;
      q.sizeEpoch = epoch;
      q.group.ratio!.rate[q.slot] = 1 / (1000 * q.size);
    }
  }

  /** Sizes a member for the response-ratio order, unless it was sized in `epoch`. */
  private sizeMember(q: Queued, rr: ResponseRatioOrder, epoch: number): void {
    if (q.sizeEpoch === epoch) return;
    const s = rr.size(q.req);
    q.size = Number.isFinite(s) && s > 0 ? s : 1;
    q.sizeEpoch = epoch;
    if (q.slot >= 0) q.group.ratio!.rate[q.slot] = 1 / (1000 * q.size);
  }

  /** An empty response-ratio heap free for this pump. */
  private ratioHeap(): RatioHeap {
    if (this.ratioHeapsInUse === this.ratioHeaps.length) this.ratioHeaps.push(new RatioHeap());
    return this.ratioHeaps[this.ratioHeapsInUse++]!.clear();
  }
}
