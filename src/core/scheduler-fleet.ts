/**
 * The scheduler's per-backend bookkeeping (issue #33: moved out of scheduler.ts as it was): the
 * backends by name, who serves each model (cached until the fleet changes), which of them may take
 * a request now, and which waiting groups a change to a backend touches. The Scheduler
 * (scheduler.ts) owns one and drives it.
 */
import type { BackendSpec, BackendView } from './types.js';
import type { BackendState, DirtyGroups, Group } from './scheduler-state.js';

const adapterSet = (a: readonly string[] | undefined): ReadonlySet<string> | undefined =>
  a && a.length > 0 ? new Set(a) : undefined;

const NONE: readonly BackendState[] = [];

export type BackendPatch = Partial<
  Pick<BackendSpec, 'weight' | 'maxConcurrency' | 'region' | 'models' | 'adapters'>
>;

/** A backend's record as `add` makes it (new, or revived keeping its index and in-flight count). */
function record(spec: BackendSpec, healthy: boolean, index: number, inFlight: number): BackendState {
  return {
    name: spec.name,
    index,
    api: spec.api,
    weight: spec.weight,
    maxConcurrency: spec.maxConcurrency,
    region: spec.region,
    models: new Set(spec.models),
    healthy,
    draining: false,
    inFlight,
    metrics: undefined,
    loadedModels: undefined,
    adapters: adapterSet(spec.adapters),
    dispatchedSinceMetrics: 0,
    completedSinceMetrics: 0,
    removed: false,
    groupSets: undefined,
  };
}

/** b serves the model (the caller's list says so) and may take it. */
function eligible(b: BackendState, exclude: ReadonlySet<string>): boolean {
  return b.healthy && !b.draining && (exclude.size === 0 || !exclude.has(b.name));
}

export class Fleet {
  readonly backends = new Map<string, BackendState>();
  private nextIndex = 0;
  private modelsCache: Set<string> | undefined;
  /** Live backends serving each model, in registration order (the order candidates are offered). */
  private servingCache: Map<string, BackendState[]> | undefined;
  /** Bumped whenever servingCache is dropped (Group.servingAt). */
  private version = 0;
  /** Per model, its groups (kept when empty: backends hold these sets, BackendState.groupSets). */
  private readonly groupsByModel = new Map<string, Set<Group>>();

  /** `dirty`: the scheduler's groups to ask again, which touch marks. */
  constructor(private readonly dirty: DirtyGroups) {}

  add(spec: BackendSpec, healthy: boolean): void {
    const existing = this.backends.get(spec.name);
    if (existing && !existing.removed) throw new Error(`backend '${spec.name}' already exists`);
    this.changed();
    for (const m of spec.models) this.touchModel(m);
    if (existing) {
      // Re-added while its old requests still run: revive the same record so they settle on it.
      Object.assign(existing, record(spec, healthy, existing.index, existing.inFlight));
      return;
    }
    this.backends.set(spec.name, record(spec, healthy, this.nextIndex++, 0));
  }

  /** Change a backend's settings (Scheduler.updateBackend). */
  update(name: string, patch: BackendPatch): void {
    const b = this.live(name);
    this.touch(b);
    if (patch.weight !== undefined) b.weight = patch.weight;
    if (patch.maxConcurrency !== undefined) b.maxConcurrency = patch.maxConcurrency;
    if (patch.region !== undefined) b.region = patch.region;
    if (patch.adapters !== undefined) b.adapters = adapterSet(patch.adapters);
    if (patch.models !== undefined) {
      b.models = new Set(patch.models);
      b.groupSets = undefined;
      this.changed();
      this.touch(b);
    }
  }

  live(name: string): BackendState {
    const b = this.backends.get(name);
    if (!b || b.removed) throw new Error(`unknown backend '${name}'`);
    return b;
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

  views(): BackendView[] {
    const out: BackendView[] = [];
    for (const b of this.backends.values()) if (!b.removed) out.push(b);
    return out.sort((a, b) => a.index - b.index);
  }

  /**
   * Something about `b` changed: waiters for its models are asked again at the next pump. (Every
   * metrics probe of every backend comes here: its models' group sets are kept on it.)
   */
  touch(b: BackendState): void {
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
  groupSet(model: string): Set<Group> {
    let gs = this.groupsByModel.get(model);
    if (!gs) this.groupsByModel.set(model, (gs = new Set()));
    return gs;
  }

  /** The group left the queue (it was empty). */
  dropGroup(g: Group): void {
    this.groupsByModel.get(g.model)?.delete(g);
  }

  changed(): void {
    this.modelsCache = undefined;
    this.servingCache = undefined;
    this.version++;
  }

  serving(model: string): readonly BackendState[] {
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

  /** The group's serving backends (cached on it until the fleet changes). */
  servingOf(g: Group): readonly BackendState[] {
    if (g.servingAt !== this.version) {
      g.serving = this.serving(g.model);
      g.servingAt = this.version;
    }
    return g.serving;
  }

  /** The backends a request of `model` that tried `exclude` may be pushed to now (eligible, below their cap). */
  candidatesFor(model: string, exclude: ReadonlySet<string>): BackendState[] {
    const out: BackendState[] = [];
    this.gatherCandidates(this.serving(model), exclude, out);
    return out;
  }

  /**
   * Those of `serving` that may take a request that tried `exclude` now, written over `out` (a
   * reused array keeps its storage: emptying it first with length = 0 would drop it, allocated
   * again at every probe's pump).
   */
  gatherCandidates(
    serving: readonly BackendState[],
    exclude: ReadonlySet<string>,
    out: BackendState[],
  ): void {
    let n = 0;
    for (let i = 0; i < serving.length; i++) {
      const b = serving[i]!;
      if (eligible(b, exclude) && b.inFlight < b.maxConcurrency) out[n++] = b;
    }
    if (out.length !== n) out.length = n;
  }

  hasEligible(serving: readonly BackendState[], exclude: ReadonlySet<string>): boolean {
    for (let i = 0; i < serving.length; i++) if (eligible(serving[i]!, exclude)) return true;
    return false;
  }
}
