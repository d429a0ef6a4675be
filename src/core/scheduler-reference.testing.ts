/**
 * Test-only: the scheduler as it was before pump became incremental (every held request against
 * every backend on every event). The property test drives it and the real one with the same
 * events and compares their decisions. Not part of the build.
 */
import type {
  BackendSpec,
  BackendView,
  CompletionReport,
  Decision,
  EngineMetrics,
  Policy,
  RejectReason,
  RequestInfo,
} from './types.js';
import { isHold } from './types.js';
import { priorityOf, type BackendPatch, type SchedulerOptions } from './scheduler.js';

/** Mutable backend state; only the scheduler writes it, policies see it as BackendView. */
interface BackendState {
  name: string;
  index: number;
  api: BackendSpec['api'];
  weight: number;
  maxConcurrency: number;
  region: string | undefined;
  models: Set<string>;
  healthy: boolean;
  draining: boolean;
  inFlight: number;
  metrics: EngineMetrics | undefined;
  loadedModels: ReadonlySet<string> | undefined;
  dispatchedSinceMetrics: number;
  completedSinceMetrics: number;
  /** Left the fleet; kept only until its in-flight requests finish. */
  removed: boolean;
}

interface Queued {
  req: RequestInfo;
  exclude: ReadonlySet<string> | undefined;
  enqueuedAt: number;
  /** Response-ratio size as of `sizeEpoch` (sized again when the policy's epoch moves). */
  size?: number;
  sizeEpoch?: number;
}

interface Pushed {
  req: RequestInfo;
  backend: BackendState;
  dispatchedAt: number;
}

const EMPTY: ReadonlySet<string> = new Set();

/**
 * The scheduling core: owns the router queue and every backend's in-flight count, asks the
 * policy where each request goes, and never pushes a backend beyond its cap. Pure: the host
 * passes `now` and carries out the returned decisions (dispatch or reject).
 *
 * A request is *eligible* on a backend that serves its model, is healthy, not draining and not
 * excluded (already tried). With no eligible backend at all it is rejected; with eligible ones
 * all at their cap (or a policy that holds it) it waits in FIFO order.
 */
export class ReferenceScheduler {
  private policy: Policy;
  private readonly backends = new Map<string, BackendState>();
  private readonly queue: Queued[] = [];
  private readonly pushed = new Map<string, Pushed>();
  private nextIndex = 0;
  private maxQueueLength: number;
  private modelsCache: Set<string> | undefined;

  constructor(opts: SchedulerOptions) {
    this.policy = opts.policy;
    this.maxQueueLength = opts.maxQueueLength ?? Infinity;
  }

  get policyName(): string {
    return this.policy.name;
  }

  /** How often the policy wants engine metrics (ms), if it says (hosts scrape/probe that fast). */
  get metricsIntervalMs(): number | undefined {
    return this.policy.traits?.metricsIntervalMs;
  }

  /** Swap the policy at run time; in-flight accounting is untouched. */
  setPolicy(policy: Policy, now: number): Decision[] {
    this.policy = policy;
    for (const q of this.queue) q.sizeEpoch = undefined;
    return this.pump(now);
  }

  setMaxQueueLength(n: number): void {
    this.maxQueueLength = n;
  }

  addBackend(spec: BackendSpec, healthy = true): void {
    this.modelsCache = undefined;
    const existing = this.backends.get(spec.name);
    if (existing && !existing.removed) throw new Error(`backend '${spec.name}' already exists`);
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
        dispatchedSinceMetrics: 0,
        completedSinceMetrics: 0,
        removed: false,
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
      dispatchedSinceMetrics: 0,
      completedSinceMetrics: 0,
      removed: false,
    });
  }

  hasBackend(name: string): boolean {
    const b = this.backends.get(name);
    return b !== undefined && !b.removed;
  }

  /** Change a backend's settings; raising a cap may let queued requests go. */
  updateBackend(name: string, patch: BackendPatch, now: number): Decision[] {
    const b = this.live(name);
    if (patch.weight !== undefined) b.weight = patch.weight;
    if (patch.maxConcurrency !== undefined) b.maxConcurrency = patch.maxConcurrency;
    if (patch.region !== undefined) b.region = patch.region;
    if (patch.models !== undefined) {
      b.models = new Set(patch.models);
      this.modelsCache = undefined;
    }
    return this.pump(now);
  }

  /** Leave the fleet. Requests in flight there still complete; queued ones may be rejected. */
  removeBackend(name: string, now: number): Decision[] {
    const b = this.live(name);
    b.removed = true;
    this.modelsCache = undefined;
    if (b.inFlight === 0) this.backends.delete(name);
    this.policy.onBackendRemoved?.(name);
    return this.pump(now);
  }

  setHealth(name: string, healthy: boolean, now: number): Decision[] {
    const b = this.backends.get(name);
    if (!b || b.removed || b.healthy === healthy) return [];
    b.healthy = healthy;
    return this.pump(now);
  }

  /** A draining backend takes no new requests; its in-flight ones finish. */
  setDraining(name: string, draining: boolean, now: number): Decision[] {
    this.live(name).draining = draining;
    return this.pump(now);
  }

  setMetrics(name: string, metrics: EngineMetrics): void {
    const b = this.backends.get(name);
    if (!b || b.removed) return;
    b.metrics = metrics;
    // The scrape already counts what was pushed before it; only later changes are the router's to credit.
    b.dispatchedSinceMetrics = 0;
    b.completedSinceMetrics = 0;
  }

  /** Models the engine has loaded in memory (Ollama /api/ps). */
  setLoadedModels(name: string, models: ReadonlySet<string>): void {
    const b = this.backends.get(name);
    if (b && !b.removed) b.loadedModels = models;
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
    return this.queue.length;
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
    if (this.pushed.has(req.id) || this.queue.some((q) => q.req.id === req.id)) {
      throw new Error(`request '${req.id}' is already scheduled`);
    }
    if (!this.hasEligible(req, exclude ?? EMPTY)) {
      return [{ type: 'reject', request: req, reason: 'no-backend' }];
    }
    if (this.queue.length >= this.maxQueueLength) {
      return [{ type: 'reject', request: req, reason: 'queue-full' }];
    }
    // Fast path: nobody waits, so FIFO order is not at stake — decide this request alone.
    if (this.queue.length === 0) {
      const d = this.tryDispatch(req, exclude ?? EMPTY, now);
      if (d) return [d];
      this.queue.push({ req, exclude, enqueuedAt: now });
      return [];
    }
    this.queue.push({ req, exclude, enqueuedAt: now });
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
    if (b.removed && b.inFlight === 0) this.backends.delete(b.name);
    this.policy.onComplete?.(p.req, b, report, now);
    return this.pump(now);
  }

  /**
   * The client went away. A queued request is dropped; a pushed one frees its slot and is
   * reported to the policy as not ok. Returns whether the id was known.
   */
  cancel(id: string, now: number): { known: boolean; decisions: Decision[] } {
    const i = this.queue.findIndex((q) => q.req.id === id);
    if (i >= 0) {
      this.queue.splice(i, 1);
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
    for (let i = 0; i < this.queue.length;) {
      const q = this.queue[i]!;
      if (now - q.enqueuedAt >= maxWaitMs) {
        this.queue.splice(i, 1);
        out.push({ type: 'reject', request: q.req, reason: 'queue-timeout' });
      } else i++;
    }
    return out;
  }

  /**
   * Reconsider every waiting request (after a slot frees or state changes): higher priority first,
   * then in FIFO order, or by response ratio when the policy asks for it (ties in FIFO order).
   */
  pump(now: number): Decision[] {
    const out: Decision[] = [];
    if (this.queue.length === 0) return out;
    const rr = this.policy.queueOrder?.kind === 'response-ratio' ? this.policy.queueOrder : undefined;
    let order = this.queue;
    if (rr || this.queue.some((q) => priorityOf(q.req) !== 0)) order = [...this.queue];
    if (rr) {
      const epoch = rr.epoch();
      const ratio = new Map<Queued, number>();
      for (const q of this.queue) {
        if (q.sizeEpoch !== epoch) {
          const s = rr.size(q.req);
          q.size = Number.isFinite(s) && s > 0 ? s : 1;
          q.sizeEpoch = epoch;
        }
        ratio.set(q, (Math.max(0, now - q.req.arrivedAt) / 1000 + q.size!) / q.size!);
      }
      // Array.prototype.sort is stable: equal ratios keep FIFO order.
      order.sort((a, b) => ratio.get(b)! - ratio.get(a)!);
    }
    // Higher priority first; equal priorities keep the order above (stable).
    if (order !== this.queue) order.sort((a, b) => priorityOf(b.req) - priorityOf(a.req));
    const gone = new Set<Queued>();
    for (const q of order) {
      const exclude = q.exclude ?? EMPTY;
      if (!this.hasEligible(q.req, exclude)) {
        out.push({ type: 'reject', request: q.req, reason: 'no-backend' as RejectReason });
        gone.add(q);
        continue;
      }
      const d = this.anyCapacity() ? this.tryDispatch(q.req, exclude, now) : undefined;
      if (d) {
        out.push(d);
        gone.add(q);
      }
    }
    if (gone.size > 0) {
      const kept = this.queue.filter((q) => !gone.has(q));
      this.queue.length = 0;
      this.queue.push(...kept);
    }
    return out;
  }

  private tryDispatch(req: RequestInfo, exclude: ReadonlySet<string>, now: number): Decision | undefined {
    const candidates: BackendState[] = [];
    for (const b of this.backends.values()) {
      if (this.eligible(b, req, exclude) && b.inFlight < b.maxConcurrency) candidates.push(b);
    }
    if (candidates.length === 0) return undefined;
    const chosen = this.policy.pick(req, candidates, now);
    if (isHold(chosen)) return undefined;
    const b = this.backends.get(chosen.name);
    if (!b || !candidates.includes(b)) throw new Error(`policy ${this.policy.name} picked a non-candidate`);
    b.inFlight++;
    if (b.metrics) b.dispatchedSinceMetrics++;
    this.pushed.set(req.id, { req, backend: b, dispatchedAt: now });
    this.policy.onDispatch?.(req, b, now);
    return { type: 'dispatch', request: req, backend: b.name };
  }

  private anyCapacity(): boolean {
    for (const b of this.backends.values()) {
      if (!b.removed && b.healthy && !b.draining && b.inFlight < b.maxConcurrency) return true;
    }
    return false;
  }

  private eligible(b: BackendState, req: RequestInfo, exclude: ReadonlySet<string>): boolean {
    return !b.removed && b.healthy && !b.draining && b.models.has(req.model) && !exclude.has(b.name);
  }

  private hasEligible(req: RequestInfo, exclude: ReadonlySet<string>): boolean {
    for (const b of this.backends.values()) if (this.eligible(b, req, exclude)) return true;
    return false;
  }

  private live(name: string): BackendState {
    const b = this.backends.get(name);
    if (!b || b.removed) throw new Error(`unknown backend '${name}'`);
    return b;
  }
}
