/**
 * The Scheduler class: the router queue, its groups and the pump that offers their members to the
 * policy. Its collaborators live beside it: scheduler-fleet.ts (the backends, who serves each model,
 * which may take a request now, which groups a change touches), scheduler-cursors.ts (how the pump
 * starts walking a group: offer order, candidates, response-ratio sizing), scheduler-state.ts
 * (backend, queued, group and cursor records, the cursor heap, the dirty list), scheduler-ratio.ts
 * (the response-ratio order), scheduler-fit.ts (the fit gate's heap and walk).
 */
import { HOLD, NO_TRAITS, isHold } from './types.js';
import type {
  BackendSpec,
  BackendView,
  CompletionReport,
  Decision,
  EngineMetrics,
  Hold,
  Policy,
  PolicyTraits,
  RejectReason,
  RequestInfo,
  ResponseRatioOrder,
} from './types.js';

import { boundOf, PumpCursors } from './scheduler-cursors.js';
import { FitHeap, GatedWalk, ungate } from './scheduler-fit.js';
import { Fleet, type BackendPatch } from './scheduler-fleet.js';
import { WALK_CANDIDATES } from './scheduler-ratio.js';
import {
  DirtyGroups,
  groupKey,
  newGroup,
  newQueued,
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
export type { BackendPatch };

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

const EMPTY: ReadonlySet<string> = new Set();

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
  /** The router queue in FIFO order, by request id. */
  private readonly queue = new Map<string, Queued>();
  /** Groups with backends excluded (retries), by groupKey. */
  private readonly groups = new Map<string, Group>();
  /** Groups with nothing excluded (most), by model: no key to build per request. */
  private readonly plainGroups = new Map<string, Group>();
  /**
   * Groups to ask again at the next pump: a backend serving their model changed (a slot freed,
   * metrics, health, settings), or they are new. The others' first member is held and stays so.
   */
  private readonly dirty = new DirtyGroups();
  /** The backends, who serves each model, and the groups a change to one touches (marks dirty). */
  private readonly fleet = new Fleet(this.dirty);
  /** Groups with a member the policy held for another reason than load: asked on every pump. */
  private readonly volatile = new Set<Group>();
  /** Requests that joined a group whose members are held one by one: asked alone at the next pump. */
  private readonly fresh = new Set<Queued>();
  private readonly pushed = new Map<string, Pushed>();
  private nextSeq = 0;
  private lastEnqueuedAt = -Infinity;
  /** Every enqueue came at or after the previous one, so the queue is in enqueuedAt order too. */
  private enqueuedInOrder = true;
  private maxQueueLength: number;
  /** How the pump starts walking each group (its cursors, ratio orders and their reused scratch). */
  private readonly cursors: PumpCursors;
  /** Stamps gatings (Queued.gateStamp): an older FitHeap entry of a member is stale. */
  private gatings = 0;

  constructor(opts: SchedulerOptions) {
    this.policy = opts.policy;
    this.traits = opts.policy.traits ?? NO_TRAITS;
    this.ratioOrder_ = responseRatioOf(opts.policy);
    this.maxQueueLength = opts.maxQueueLength ?? Infinity;
    this.cursors = new PumpCursors(this.fleet, Math.max(1, opts.ratioWalkCandidates ?? WALK_CANDIDATES));
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
    this.fleet.add(spec, healthy);
  }

  hasBackend(name: string): boolean {
    const b = this.fleet.backends.get(name);
    return b !== undefined && !b.removed;
  }

  /** Change a backend's settings; raising a cap may let queued requests go. */
  updateBackend(name: string, patch: BackendPatch, now: number): Decision[] {
    this.fleet.update(name, patch);
    return this.pump(now);
  }

  /** Leave the fleet. Requests in flight there still complete; queued ones may be rejected. */
  removeBackend(name: string, now: number): Decision[] {
    const b = this.fleet.live(name);
    b.removed = true;
    this.fleet.changed();
    this.fleet.touch(b);
    if (b.inFlight === 0) this.fleet.backends.delete(name);
    this.policy.onBackendRemoved?.(name);
    return this.pump(now);
  }

  setHealth(name: string, healthy: boolean, now: number): Decision[] {
    const b = this.fleet.backends.get(name);
    if (!b || b.removed || b.healthy === healthy) return [];
    b.healthy = healthy;
    this.fleet.touch(b);
    return this.pump(now);
  }

  /** A draining backend takes no new requests; its in-flight ones finish. */
  setDraining(name: string, draining: boolean, now: number): Decision[] {
    const b = this.fleet.live(name);
    b.draining = draining;
    this.fleet.touch(b);
    return this.pump(now);
  }

  setMetrics(name: string, metrics: EngineMetrics): void {
    const b = this.fleet.backends.get(name);
    if (!b || b.removed) return;
    b.metrics = metrics;
    // A policy whose holds never read metrics has no held request to ask again for them (probes
    // come every few tens of ms, and hundreds may wait).
    if (this.traits.holdsIgnoreMetrics !== true) this.fleet.touch(b);
    // The scrape already counts what was pushed before it; only later changes are the router's to credit.
    b.dispatchedSinceMetrics = 0;
    b.completedSinceMetrics = 0;
  }

  /** Models the engine has loaded in memory (Ollama /api/ps). */
  setLoadedModels(name: string, models: ReadonlySet<string>): void {
    const b = this.fleet.backends.get(name);
    if (!b || b.removed) return;
    b.loadedModels = models;
    this.fleet.touch(b);
  }

  /** Models served by live backends (healthy or not): the fleet's union. Cached: read per request. */
  models(): ReadonlySet<string> {
    return this.fleet.models();
  }

  backendViews(): BackendView[] {
    return this.fleet.views();
  }

  backend(name: string): BackendView | undefined {
    const b = this.fleet.backends.get(name);
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
    if (!this.fleet.hasEligible(this.fleet.serving(req.model), ex)) {
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
    this.fleet.touch(b);
    if (b.removed && b.inFlight === 0) this.fleet.backends.delete(b.name);
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
    const cursors = this.cursors;
    const heap = cursors.heap;
    if (heap.length !== 0) heap.length = 0; // only if a policy threw in the last pump (it drops the storage)
    cursors.reset();
    let pushes = 0;
    const rr = this.ratioOrder_;
    const epoch = rr?.epoch() ?? 0;
    const gate = this.traits.fitGate;
    const dirty = this.dirty.list;
    for (let i = 0; i < this.dirty.end; i++) {
      const g = dirty[i]!;
      if (g.dirtyAt === i) cursors.start(g, undefined, rr, gate, epoch, now);
    }
    for (const g of this.volatile) if (!this.dirty.has(g)) cursors.start(g, undefined, rr, gate, epoch, now);
    for (const q of this.fresh)
      if (!this.dirty.has(q.group) && !this.volatile.has(q.group))
        cursors.start(q.group, q, rr, gate, epoch, now);
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
        cursors.candidatesAt(c, pushes);
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
        cursors.candidatesAt(c, pushes);
        boundOf(c, this.traits.fitGate!, now);
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
    if (gate !== undefined && q.fit > boundOf(c, gate, now)) return true;
    ungate(q);
    return false;
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

  private enqueue(req: RequestInfo, exclude: ReadonlySet<string>, now: number): Queued {
    const priority = priorityOf(req);
    const plain = exclude.size === 0 && priority === 0;
    const key = plain ? req.model : groupKey(req.model, exclude, priority);
    const groups = plain ? this.plainGroups : this.groups;
    let g = groups.get(key);
    if (!g) {
      g = newGroup(req.model, exclude, priority, key);
      groups.set(key, g);
      this.fleet.groupSet(req.model).add(g);
    }
    const q = newQueued(req, now, this.nextSeq++, g);
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
    ungate(q);
    if (g.members.size > 0) return;
    // Empty groups go, so retries' one-off exclude sets do not pile up.
    (g.exclude.size === 0 && g.priority === 0 ? this.plainGroups : this.groups).delete(g.key);
    this.fleet.dropGroup(g);
    this.dirty.delete(g);
    if (this.volatile.size > 0) this.volatile.delete(g);
  }

  private tryDispatch(req: RequestInfo, exclude: ReadonlySet<string>, now: number): Attempt {
    return this.offer(req, this.fleet.candidatesFor(req.model, exclude), now);
  }

  /** Asks the policy for one request among `candidates` (none: 'full') and pushes it if it picks. */
  private offer(req: RequestInfo, candidates: readonly BackendState[], now: number): Attempt {
    if (candidates.length === 0) return 'full';
    const chosen = this.policy.pick(req, candidates, now);
    if (isHold(chosen)) return chosen;
    // Policies return one of the candidates: no lookup by name then.
    const b = candidates.includes(chosen as BackendState)
      ? (chosen as BackendState)
      : this.fleet.backends.get(chosen.name);
    if (!b || !candidates.includes(b)) throw new Error(`policy ${this.policy.name} picked a non-candidate`);
    b.inFlight++;
    if (b.metrics) b.dispatchedSinceMetrics++;
    this.pushed.set(req.id, { req, backend: b, dispatchedAt: now });
    this.policy.onDispatch?.(req, b, now);
    return { type: 'dispatch', request: req, backend: b.name };
  }
}
