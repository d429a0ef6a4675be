/**
 * The Scheduler class (about 850 lines, over the ~500 the house aims for: one class whose private
 * state — groups, cursors, dirty sets, fit gates — every method reads, so it is kept whole). Its
 * helpers live beside it: scheduler-state.ts (backend, queued, group and cursor records, the
 * cursor heap, the dirty list), scheduler-ratio.ts (the response-ratio order), scheduler-fit.ts
 * (the fit gate's heap and walk).
 */
import { HOLD, NO_TRAITS, isHold } from './types.js';
import type {
  BackendSpec,
  BackendView,
  CompletionReport,
  Decision,
  EngineMetrics,
  FitGate,
  Hold,
  Policy,
  PolicyTraits,
  RejectReason,
  RequestInfo,
  ResponseRatioOrder,
} from './types.js';

import { FitHeap, GatedWalk } from './scheduler-fit.js';
import {
  RatioHeap,
  RatioIndex,
  RatioWalk,
  WALK_CANDIDATES,
  ratioOf,
  type RatioOrder,
} from './scheduler-ratio.js';
import {
  DirtyGroups,
  groupKey,
  heapPop,
  heapPush,
  nextOf,
  priorityOf,
  type BackendState,
  type Cursor,
  type Group,
  type Queued,
} from './scheduler-state.js';

export { priorityOf };

/** What asking for one request gave: pushed, no backend below its cap, or the policy's hold. */
type Attempt = Decision | 'full' | Hold;

interface Pushed {
  req: RequestInfo;
  backend: BackendState;
  dispatchedAt: number;
}

export interface SchedulerOptions {
  policy: Policy;
  /** Most requests waiting in the router queue; more are rejected 'queue-full'. */
  maxQueueLength?: number;
  /**
   * Members a response-ratio ordering sorts exactly up front (RatioWalk; 32). Tests set a small
   * one so that their small queues go past it.
   */
  ratioWalkCandidates?: number;
}

export type BackendPatch = Partial<
  Pick<BackendSpec, 'weight' | 'maxConcurrency' | 'region' | 'models' | 'adapters'>
>;

const adapterSet = (a: readonly string[] | undefined): ReadonlySet<string> | undefined =>
  a && a.length > 0 ? new Set(a) : undefined;

const EMPTY: ReadonlySet<string> = new Set();
const NONE: readonly BackendState[] = [];
/** Cursors of groups not probed for a hold start with none (gathered at their first offer). */
const NO_CANDIDATES: BackendState[] = [];

/** The policy's queue order when it is by response ratio (else FIFO: undefined). */
function responseRatioOf(policy: Policy): ResponseRatioOrder | undefined {
  const o = policy.queueOrder;
  return o !== undefined && o.kind === 'response-ratio' ? o : undefined;
}

/**
 * The scheduling core: owns the router queue and every backend's in-flight count, asks the
 * policy where each request goes, and never pushes a backend beyond its cap. Pure: the host
 * passes `now` and carries out the returned decisions (dispatch or reject).
 *
 * A request is *eligible* on a backend that serves its model, is healthy, not draining and not
 * excluded (already tried). With no eligible backend at all it is rejected; with eligible ones
 * all at their cap (or a policy that holds it) it waits in FIFO order.
 */
export class Scheduler {
  private policy: Policy;
  /** The policy's traits (none declared: NO_TRAITS) and its queue order when response ratio. */
  private traits: PolicyTraits;
  private ratioOrder_: ResponseRatioOrder | undefined;
  private readonly backends = new Map<string, BackendState>();
  /** The router queue in FIFO order, by request id. */
  private readonly queue = new Map<string, Queued>();
  /** Groups with backends excluded (retries), by groupKey. */
  private readonly groups = new Map<string, Group>();
  /** Groups with nothing excluded (most), by model: no key to build per request. */
  private readonly plainGroups = new Map<string, Group>();
  /** Per model, its groups (kept when empty: backends hold these sets, BackendState.groupSets). */
  private readonly groupsByModel = new Map<string, Set<Group>>();
  /**
   * Groups to ask again at the next pump: a backend serving their model changed (a slot freed,
   * metrics, health, settings), or they are new. The others' first member is held and stays so.
   */
  private readonly dirty = new DirtyGroups();
  /** Groups with a member the policy held for another reason than load: asked on every pump. */
  private readonly volatile = new Set<Group>();
  /** Requests that joined a group whose members are held one by one: asked alone at the next pump. */
  private readonly fresh = new Set<Queued>();
  private readonly pushed = new Map<string, Pushed>();
  private nextIndex = 0;
  private nextSeq = 0;
  private lastEnqueuedAt = -Infinity;
  /** Every enqueue came at or after the previous one, so the queue is in enqueuedAt order too. */
  private enqueuedInOrder = true;
  private maxQueueLength: number;
  private readonly ratioWalkCandidates: number;
  private modelsCache: Set<string> | undefined;
  /** Live backends serving each model, in registration order (the order candidates are offered). */
  private servingCache: Map<string, BackendState[]> | undefined;
  /** Bumped whenever servingCache is dropped (Group.servingAt). */
  private fleetVersion = 0;
  /** startCursor's candidates while the policy is asked whether it holds them all (reused). */
  private readonly probeCandidates: BackendState[] = [];
  /** Response-ratio heaps and walks kept for reuse; the first `…InUse` belong to the running pump. */
  private readonly ratioHeaps: RatioHeap[] = [];
  private ratioHeapsInUse = 0;
  private readonly ratioWalks: RatioWalk[] = [];
  private ratioWalksInUse = 0;
  /** The pump's cursors in offer order (a heap; reused). */
  private readonly cursors: Cursor[] = [];
  /** Numbers the ratio walks (Queued.walk). */
  private walkStamp = 0;
  /** sizeMembers' scratch: the members it sizes, their requests, and the sizes. */
  /** Stamps gatings (Queued.gateStamp): an older FitHeap entry of a member is stale. */
  private gatings = 0;
  private readonly sizeBatch: Queued[] = [];
  private readonly sizeReqs: RequestInfo[] = [];
  private sizeOut = new Float64Array(64);

  constructor(opts: SchedulerOptions) {
    this.policy = opts.policy;
    this.traits = opts.policy.traits ?? NO_TRAITS;
    this.ratioOrder_ = responseRatioOf(opts.policy);
    this.maxQueueLength = opts.maxQueueLength ?? Infinity;
    this.ratioWalkCandidates = Math.max(1, opts.ratioWalkCandidates ?? WALK_CANDIDATES);
  }

  get policyName(): string {
    return this.policy.name;
  }

  /** How often the policy wants engine metrics (ms), if it says (hosts scrape/probe that fast). */
  get metricsIntervalMs(): number | undefined {
    return this.traits.metricsIntervalMs;
  }

  /** Swap the policy at run time; in-flight accounting is untouched. */
  setPolicy(policy: Policy, now: number): Decision[] {
    this.policy = policy;
    this.traits = policy.traits ?? NO_TRAITS;
    this.ratioOrder_ = responseRatioOf(policy);
    // Sizes and fit gates came from the old policy.
    for (const q of this.queue.values()) {
      q.sizeEpoch = NaN;
      q.fit = NaN;
    }
    for (const groups of [this.plainGroups, this.groups])
      for (const g of groups.values()) {
        g.gated = 0;
        g.gate?.clear();
      }
    for (const g of this.plainGroups.values()) if (g.ratio) g.ratio.sizedEpoch = NaN;
    for (const g of this.groups.values()) if (g.ratio) g.ratio.sizedEpoch = NaN;
    for (const g of this.plainGroups.values()) this.dirty.add(g);
    for (const g of this.groups.values()) this.dirty.add(g);
    return this.pump(now);
  }

  setMaxQueueLength(n: number): void {
    this.maxQueueLength = n;
  }

  addBackend(spec: BackendSpec, healthy = true): void {
    const existing = this.backends.get(spec.name);
    if (existing && !existing.removed) throw new Error(`backend '${spec.name}' already exists`);
    this.fleetChanged();
    for (const m of spec.models) this.touchModel(m);
    if (existing) {
      // Re-added while its old requests still run: revive the same record so they settle on it.
      Object.assign(existing, {
        api: spec.api,
        weight: spec.weight,
        maxConcurrency: spec.maxConcurrency,
        region: spec.region,
        models: new Set(spec.models),
        healthy,
        draining: false,
        metrics: undefined,
        loadedModels: undefined,
        adapters: adapterSet(spec.adapters),
        dispatchedSinceMetrics: 0,
        completedSinceMetrics: 0,
        removed: false,
        groupSets: undefined,
      });
      return;
    }
    this.backends.set(spec.name, {
      name: spec.name,
      index: this.nextIndex++,
      api: spec.api,
      weight: spec.weight,
      maxConcurrency: spec.maxConcurrency,
      region: spec.region,
      models: new Set(spec.models),
      healthy,
      draining: false,
      inFlight: 0,
      metrics: undefined,
      loadedModels: undefined,
      adapters: adapterSet(spec.adapters),
      dispatchedSinceMetrics: 0,
      completedSinceMetrics: 0,
      removed: false,
      groupSets: undefined,
    });
  }

  hasBackend(name: string): boolean {
    const b = this.backends.get(name);
    return b !== undefined && !b.removed;
  }

  /** Change a backend's settings; raising a cap may let queued requests go. */
  updateBackend(name: string, patch: BackendPatch, now: number): Decision[] {
    const b = this.live(name);
    this.touch(b);
    if (patch.weight !== undefined) b.weight = patch.weight;
    if (patch.maxConcurrency !== undefined) b.maxConcurrency = patch.maxConcurrency;
    if (patch.region !== undefined) b.region = patch.region;
    if (patch.adapters !== undefined) b.adapters = adapterSet(patch.adapters);
    if (patch.models !== undefined) {
      b.models = new Set(patch.models);
      b.groupSets = undefined;
      this.fleetChanged();
      this.touch(b);
    }
    return this.pump(now);
  }

  /** Leave the fleet. Requests in flight there still complete; queued ones may be rejected. */
  removeBackend(name: string, now: number): Decision[] {
    const b = this.live(name);
    b.removed = true;
    this.fleetChanged();
    this.touch(b);
    if (b.inFlight === 0) this.backends.delete(name);
    this.policy.onBackendRemoved?.(name);
    return this.pump(now);
  }

  setHealth(name: string, healthy: boolean, now: number): Decision[] {
    const b = this.backends.get(name);
    if (!b || b.removed || b.healthy === healthy) return [];
    b.healthy = healthy;
    this.touch(b);
    return this.pump(now);
  }

  /** A draining backend takes no new requests; its in-flight ones finish. */
  setDraining(name: string, draining: boolean, now: number): Decision[] {
    const b = this.live(name);
    b.draining = draining;
    this.touch(b);
    return this.pump(now);
  }

  setMetrics(name: string, metrics: EngineMetrics): void {
    const b = this.backends.get(name);
    if (!b || b.removed) return;
    b.metrics = metrics;
    // A policy whose holds never read metrics has no held request to ask again for them (probes
    // come every few tens of ms, and hundreds may wait).
    if (this.traits.holdsIgnoreMetrics !== true) this.touch(b);
    // The scrape already counts what was pushed before it; only later changes are the router's to credit.
    b.dispatchedSinceMetrics = 0;
    b.completedSinceMetrics = 0;
  }

  /** Models the engine has loaded in memory (Ollama /api/ps). */
  setLoadedModels(name: string, models: ReadonlySet<string>): void {
    const b = this.backends.get(name);
    if (!b || b.removed) return;
    b.loadedModels = models;
    this.touch(b);
  }

  /** Models served by live backends (healthy or not): the fleet's union. Cached: read per request. */
  models(): ReadonlySet<string> {
    if (!this.modelsCache) {
      const out = new Set<string>();
      for (const b of this.backends.values()) if (!b.removed) for (const m of b.models) out.add(m);
      this.modelsCache = out;
    }
    return this.modelsCache;
  }

  backendViews(): BackendView[] {
    const out: BackendView[] = [];
    for (const b of this.backends.values()) if (!b.removed) out.push(b);
    return out.sort((a, b) => a.index - b.index);
  }

  backend(name: string): BackendView | undefined {
    const b = this.backends.get(name);
    return b && !b.removed ? b : undefined;
  }

  describe(name: string): Readonly<Record<string, number>> {
    return this.policy.describe?.(name) ?? {};
  }

  get queueLength(): number {
    return this.queue.size;
  }

  get inFlightTotal(): number {
    return this.pushed.size;
  }

  /**
   * A new request (or a retry, with the backends already tried in `exclude`). It goes to the
   * back of the queue so earlier waiters keep their turn; the returned decisions may dispatch it
   * and others.
   */
  submit(req: RequestInfo, now: number, exclude?: ReadonlySet<string>): Decision[] {
    if (this.pushed.has(req.id) || this.queue.has(req.id)) {
      throw new Error(`request '${req.id}' is already scheduled`);
    }
    const ex = exclude ?? EMPTY;
    if (!this.hasEligible(this.serving(req.model), ex)) {
      return [{ type: 'reject', request: req, reason: 'no-backend' }];
    }
    if (this.queue.size >= this.maxQueueLength) {
      return [{ type: 'reject', request: req, reason: 'queue-full' }];
    }
    // Fast path: nobody waits, so FIFO order is not at stake — decide this request alone.
    if (this.queue.size === 0) {
      const d = this.tryDispatch(req, ex, now);
      if (d !== 'full' && !isHold(d)) return [d];
      const q = this.enqueue(req, ex, now);
      const g = q.group;
      g.allHeld = d === 'full' || d === HOLD.load;
      if (!g.allHeld) {
        if (d !== HOLD.untilChange) this.volatile.add(g);
        else this.gate(q);
      }
      return [];
    }
    const q = this.enqueue(req, ex, now);
    const g = q.group;
    if (g.members.size === 1) this.dirty.add(g);
    // Joining a group that is all held (and nothing changed since): held as well. One whose
    // members are held one by one: this one is asked, alone.
    else if (!g.allHeld && !this.dirty.has(g) && !this.volatile.has(g)) this.fresh.add(q);
    return this.pump(now);
  }

  /** A pushed request ended. Frees its slot and lets waiters go. Unknown ids are ignored (idempotent). */
  complete(id: string, report: CompletionReport, now: number): Decision[] {
    const p = this.pushed.get(id);
    if (!p) return [];
    this.pushed.delete(id);
    const b = p.backend;
    b.inFlight--;
    if (b.metrics) b.completedSinceMetrics++;
    this.touch(b);
    if (b.removed && b.inFlight === 0) this.backends.delete(b.name);
    this.policy.onComplete?.(p.req, b, report, now);
    return this.pump(now);
  }

  /**
   * The client went away. A queued request is dropped; a pushed one frees its slot and is
   * reported to the policy as not ok. Returns whether the id was known.
   */
  cancel(id: string, now: number): { known: boolean; decisions: Decision[] } {
    const q = this.queue.get(id);
    if (q) {
      this.dequeue(q);
      return { known: true, decisions: [] };
    }
    const p = this.pushed.get(id);
    if (!p) return { known: false, decisions: [] };
    const decisions = this.complete(id, { ok: false, dispatchedAt: p.dispatchedAt, finishedAt: now }, now);
    return { known: true, decisions };
  }

  /** Reject requests that waited longer than `maxWaitMs` in the router queue. */
  expire(now: number, maxWaitMs: number): Decision[] {
    const out: Decision[] = [];
    for (const q of this.queue.values()) {
      if (now - q.enqueuedAt >= maxWaitMs) {
        this.dequeue(q);
        out.push({ type: 'reject', request: q.req, reason: 'queue-timeout' });
      } else if (this.enqueuedInOrder) break; // the rest came later
    }
    return out;
  }

  /**
   * Reconsider waiting requests in FIFO order (after a slot frees or state changes): those of the
   * groups a change touched or that the policy holds for other reasons than load. The rest would
   * be held again, so skipping them gives the same decisions as asking for every one.
   */
  pump(now: number): Decision[] {
    const out: Decision[] = [];
    if (this.queue.size === 0 || (this.dirty.size === 0 && this.volatile.size === 0 && this.fresh.size === 0))
      return out;
    const heap = this.cursors;
    if (heap.length !== 0) heap.length = 0; // only if a policy threw in the last pump (it drops the storage)
    this.ratioHeapsInUse = 0;
    this.ratioWalksInUse = 0;
    let pushes = 0;
    const rr = this.ratioOrder_;
    const epoch = rr?.epoch() ?? 0;
    const dirty = this.dirty.list;
    for (let i = 0; i < this.dirty.end; i++) {
      const g = dirty[i]!;
      if (g.dirtyAt === i) this.startCursor(heap, g, undefined, rr, epoch, now);
    }
    for (const g of this.volatile)
      if (!this.dirty.has(g)) this.startCursor(heap, g, undefined, rr, epoch, now);
    for (const q of this.fresh)
      if (!this.dirty.has(q.group) && !this.volatile.has(q.group))
        this.startCursor(heap, q.group, q, rr, epoch, now);
    this.dirty.clear();
    // (Set.clear allocates a table, even for an empty set.)
    if (this.volatile.size > 0) this.volatile.clear();
    if (this.fresh.size > 0) this.fresh.clear();
    while (heap.length > 0) {
      const c = heapPop(heap);
      const q = c.at;
      if (!c.eligible) {
        this.dequeue(q);
        out.push({ type: 'reject', request: q.req, reason: 'no-backend' as RejectReason });
      } else {
        this.candidatesAt(c, pushes);
        if (q.fit === q.fit && this.heldAgain(q, c, now)) {
          // Still too big for every candidate: held again without asking (PolicyTraits.fitGate).
          const next = nextOf(c);
          if (next) {
            c.at = next;
            heapPush(heap, c);
          } else c.group.allHeld = false;
          continue;
        }
        const d = this.offer(q.req, c.candidates, now);
        // No backend below its cap: the same for every later member, until a slot frees.
        if (d === 'full' || d === HOLD.load) {
          c.group.allHeld = true;
          continue;
        }
        if (isHold(d)) {
          if (d !== HOLD.untilChange) this.volatile.add(c.group);
          else this.gate(q);
        } else {
          this.dequeue(q);
          out.push(d);
          pushes++;
        }
      }
      if (c.rest instanceof GatedWalk) {
        // The walk picks its next member by the bound: a push lowered it, so lower it first
        // (with the last one most of those the walk would read are above the new bound).
        this.candidatesAt(c, pushes);
        this.boundOf(c, this.traits.fitGate!, now);
      }
      const next = nextOf(c);
      if (next) {
        c.at = next;
        heapPush(heap, c);
      } else c.group.allHeld = false; // every member asked, none stopped the group
    }
    return out;
  }

  /**
   * Whether gated member `q` is above its cursor's bound (held again, not asked); otherwise it
   * is ungated, to be asked. The bound is computed once per candidate list.
   */
  private heldAgain(q: Queued, c: Cursor, now: number): boolean {
    const gate = this.traits.fitGate;
    if (gate !== undefined && q.fit > this.boundOf(c, gate, now)) return true;
    this.ungate(q);
    return false;
  }

  /**
   * The cursor's candidates as of `pushes` pushes into the pump: within a pump only a push changes
   * who is below its cap, so they are gathered again after one, not for every member offered.
   */
  private candidatesAt(c: Cursor, pushes: number): void {
    if (c.dispatchesAt === pushes) return;
    c.candidates = []; // a new array: a policy may keep the last one
    this.gatherCandidates(this.servingOf(c.group), c.group.exclude, c.candidates);
    c.dispatchesAt = pushes;
  }

  /** FitGate.bound of the cursor's candidates, computed once per candidate list. */
  private boundOf(c: Cursor, gate: FitGate, now: number): number {
    if (c.boundAt !== c.dispatchesAt) {
      c.bound = gate.bound(c.candidates, now);
      c.boundAt = c.dispatchesAt;
    }
    return c.bound;
  }

  /** A request held until it fits (PolicyTraits.fitGate): asked again only once a bound reaches its size. */
  private gate(q: Queued): void {
    const gate = this.traits.fitGate;
    if (gate === undefined) return;
    const f = gate.size(q.req);
    if (f !== f) return; // NaN: no size, asked at every change
    const g = q.group;
    if (q.fit !== q.fit) g.gated++;
    q.fit = f;
    q.gateStamp = ++this.gatings;
    (g.gate ??= new FitHeap()).push(q);
    g.gate.compact(g.gated);
  }

  private ungate(q: Queued): void {
    if (q.fit === q.fit) {
      q.fit = NaN;
      q.group.gated--;
    }
  }

  /** Starts walking the group's members, or only `single` (one that joined), in offer order. */
  private startCursor(
    heap: Cursor[],
    g: Group,
    single: Queued | undefined,
    rr: ResponseRatioOrder | undefined,
    epoch: number,
    now: number,
  ): void {
    const eligible = this.hasEligible(this.servingOf(g), g.exclude);
    let candidates: BackendState[] = NO_CANDIDATES;
    let dispatchesAt = -1;
    const gate = this.traits.fitGate;
    if (gate && eligible && !rr && single === undefined && g.gated > 0 && g.gated === g.members.size) {
      this.startGated(heap, g, gate, now);
      return;
    }
    if (rr && eligible) {
      // Ordering costs a pass over the group: skip it when none of them could go now anyway.
      const probe = this.probeCandidates;
      this.gatherCandidates(this.servingOf(g), g.exclude, probe);
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
  private startGated(heap: Cursor[], g: Group, gate: FitGate, now: number): void {
    const probe = this.probeCandidates;
    this.gatherCandidates(this.servingOf(g), g.exclude, probe);
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
    heapPush(heap, c);
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

  /** The backends a request of `model` that tried `exclude` may be pushed to now (eligible, below their cap). */
  private candidatesFor(model: string, exclude: ReadonlySet<string>): BackendState[] {
    const out: BackendState[] = [];
    this.gatherCandidates(this.serving(model), exclude, out);
    return out;
  }

  /**
   * Those of `serving` that may take a request that tried `exclude` now, written over `out` (a
   * reused array keeps its storage: emptying it first with length = 0 would drop it, allocated
   * again at every probe's pump).
   */
  private gatherCandidates(
    serving: readonly BackendState[],
    exclude: ReadonlySet<string>,
    out: BackendState[],
  ): void {
    let n = 0;
    for (let i = 0; i < serving.length; i++) {
      const b = serving[i]!;
      if (this.eligible(b, exclude) && b.inFlight < b.maxConcurrency) out[n++] = b;
    }
    if (out.length !== n) out.length = n;
  }

  /** The group's serving backends (cached on it until the fleet changes). */
  private servingOf(g: Group): readonly BackendState[] {
    if (g.servingAt !== this.fleetVersion) {
      g.serving = this.serving(g.model);
      g.servingAt = this.fleetVersion;
    }
    return g.serving;
  }

  private enqueue(req: RequestInfo, exclude: ReadonlySet<string>, now: number): Queued {
    const priority = priorityOf(req);
    const plain = exclude.size === 0 && priority === 0;
    const key = plain ? req.model : groupKey(req.model, exclude, priority);
    const groups = plain ? this.plainGroups : this.groups;
    let g = groups.get(key);
    if (!g) {
      g = {
        model: req.model,
        exclude,
        priority,
        key,
        serving: NONE,
        servingAt: -1,
        members: new Map(),
        ratio: undefined,
        dirtyAt: -1,
        gate: undefined,
        gated: 0,
        allHeld: false,
      };
      groups.set(key, g);
      this.groupSet(req.model).add(g);
    }
    const q: Queued = {
      req,
      arrivedAt: req.arrivedAt,
      enqueuedAt: now,
      seq: this.nextSeq++,
      group: g,
      size: NaN,
      sizeEpoch: NaN,
      slot: -1,
      walk: 0,
      fit: NaN,
      gateStamp: 0,
    };
    g.members.set(req.id, q);
    g.ratio?.add(q);
    this.queue.set(req.id, q);
    if (now < this.lastEnqueuedAt) this.enqueuedInOrder = false;
    this.lastEnqueuedAt = now;
    return q;
  }

  private dequeue(q: Queued): void {
    this.queue.delete(q.req.id);
    if (this.fresh.size > 0) this.fresh.delete(q);
    const g = q.group;
    g.members.delete(q.req.id);
    if (q.slot >= 0) g.ratio!.remove(q);
    this.ungate(q);
    if (g.members.size > 0) return;
    // Empty groups go, so retries' one-off exclude sets do not pile up.
    (g.exclude.size === 0 && g.priority === 0 ? this.plainGroups : this.groups).delete(g.key);
    this.groupsByModel.get(g.model)?.delete(g);
    this.dirty.delete(g);
    if (this.volatile.size > 0) this.volatile.delete(g);
  }

  /**
   * Something about `b` changed: waiters for its models are asked again at the next pump. (Every
   * metrics probe of every backend comes here: its models' group sets are kept on it.)
   */
  private touch(b: BackendState): void {
    let sets = b.groupSets;
    if (sets === undefined) {
      sets = [];
      for (const m of b.models) sets.push(this.groupSet(m));
      b.groupSets = sets;
    }
    for (let i = 0; i < sets.length; i++) {
      const gs = sets[i]!;
      if (gs.size !== 0) for (const g of gs) this.dirty.add(g);
    }
  }

  private touchModel(model: string): void {
    const gs = this.groupsByModel.get(model);
    if (gs) for (const g of gs) this.dirty.add(g);
  }

  /** The model's groups (created empty; kept, since backends hold it: BackendState.groupSets). */
  private groupSet(model: string): Set<Group> {
    let gs = this.groupsByModel.get(model);
    if (!gs) this.groupsByModel.set(model, (gs = new Set()));
    return gs;
  }

  private fleetChanged(): void {
    this.modelsCache = undefined;
    this.servingCache = undefined;
    this.fleetVersion++;
  }

  private serving(model: string): readonly BackendState[] {
    if (!this.servingCache) {
      const cache = new Map<string, BackendState[]>();
      for (const b of this.backends.values()) {
        if (b.removed) continue;
        for (const m of b.models) {
          let list = cache.get(m);
          if (!list) cache.set(m, (list = []));
          list.push(b);
        }
      }
      this.servingCache = cache;
    }
    return this.servingCache.get(model) ?? NONE;
  }

  private tryDispatch(req: RequestInfo, exclude: ReadonlySet<string>, now: number): Attempt {
    return this.offer(req, this.candidatesFor(req.model, exclude), now);
  }

  /** Asks the policy for one request among `candidates` (none: 'full') and pushes it if it picks. */
  private offer(req: RequestInfo, candidates: readonly BackendState[], now: number): Attempt {
    if (candidates.length === 0) return 'full';
    const chosen = this.policy.pick(req, candidates, now);
    if (isHold(chosen)) return chosen;
    // Policies return one of the candidates: no lookup by name then.
    const b = candidates.includes(chosen as BackendState)
      ? (chosen as BackendState)
      : this.backends.get(chosen.name);
    if (!b || !candidates.includes(b)) throw new Error(`policy ${this.policy.name} picked a non-candidate`);
    b.inFlight++;
    if (b.metrics) b.dispatchedSinceMetrics++;
    this.pushed.set(req.id, { req, backend: b, dispatchedAt: now });
    this.policy.onDispatch?.(req, b, now);
    return { type: 'dispatch', request: req, backend: b.name };
  }

  /** b serves the model (the caller's list says so) and may take it. */
  private eligible(b: BackendState, exclude: ReadonlySet<string>): boolean {
    return b.healthy && !b.draining && (exclude.size === 0 || !exclude.has(b.name));
  }

  private hasEligible(serving: readonly BackendState[], exclude: ReadonlySet<string>): boolean {
    for (let i = 0; i < serving.length; i++) if (this.eligible(serving[i]!, exclude)) return true;
    return false;
  }

  private live(name: string): BackendState {
    const b = this.backends.get(name);
    if (!b || b.removed) throw new Error(`unknown backend '${name}'`);
    return b;
  }
}
