/**
 * The scheduler's queue state: backends as the scheduler keeps them, waiting requests (Queued) in
 * groups that see the same candidates, the pump's cursors over them and their offer order, and
 * the groups to ask again. Data only; the Scheduler (scheduler.ts) drives it.
 */
import type { BackendSpec, EngineMetrics, RequestInfo } from './types.js';
import type { FitHeap } from './scheduler-fit.js';
import type { RatioIndex, RatioOrder } from './scheduler-ratio.js';

/** Mutable backend state; only the scheduler writes it, policies see it as BackendView. */
export interface BackendState {
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
  adapters: ReadonlySet<string> | undefined;
  dispatchedSinceMetrics: number;
  completedSinceMetrics: number;
  /** Left the fleet; kept only until its in-flight requests finish. */
  removed: boolean;
  /** The waiting groups of each of its models, in `models` order (undefined: to gather again). */
  groupSets: Set<Group>[] | undefined;
}

export interface Queued {
  req: RequestInfo;
  /** req.arrivedAt (read for every held member at each response-ratio ordering). */
  arrivedAt: number;
  enqueuedAt: number;
  /** Arrival order in the router queue. */
  seq: number;
  group: Group;
  /** Its size for the response-ratio order (Policy.queueOrder), as of `sizeEpoch` (NaN: none yet). */
  size: number;
  sizeEpoch: number;
  /** Its place in its group's RatioIndex (-1: none, or left the queue). */
  slot: number;
  /** The ratio walk that last offered it (RatioWalk: not offered again in the same walk). */
  walk: number;
  /**
   * Held until it fits (PolicyTraits.fitGate): its size then; NaN while not gated. A gated member is
   * asked only once the bound of its group's candidates reaches it.
   */
  fit: number;
  /** Which gating its entry in the group's FitHeap belongs to (older entries are stale). */
  gateStamp: number;
}

/**
 * Waiting requests that see the same candidates: one model and the same backends already tried
 * (and, for the order, one priority).
 * Within a pump, the first one held (no backend below its cap, or the policy holding on load)
 * means every later one is held too, so the rest are not asked.
 */
export interface Group {
  model: string;
  exclude: ReadonlySet<string>;
  /** Its members' RequestInfo.priority (0 when absent): a group holds one priority. */
  priority: number;
  /**
   * Its key in Scheduler.groups, or the model alone in plainGroups (nothing excluded, priority 0).
   */
  key: string;
  /** Live backends serving the model, as of fleet version `servingAt`. */
  serving: readonly BackendState[];
  servingAt: number;
  /** FIFO (a Map keeps insertion order and deletes anywhere in O(1)). */
  members: Map<string, Queued>;
  /** The members in slot arrays for the response-ratio order; made at the group's first ordering. */
  ratio: RatioIndex | undefined;
  /** Its place in Scheduler.dirty's list (-1: not dirty). */
  dirtyAt: number;
  /** Its gated members by size (made at the first gating), and how many are gated. */
  gate: FitHeap | undefined;
  gated: number;
  /**
   * The last pump stopped at a member held on load alone or with no backend below its cap: every
   * member, and any that joins, is held until a backend serving the model changes. Otherwise its
   * members are held one by one (HOLD.untilChange) and one that joins is asked.
   */
  allHeld: boolean;
}

/** A group's place in one pump: the member it is at. */
export interface Cursor {
  group: Group;
  at: Queued;
  /** Offer order across groups: higher first, then earlier arrival (0 in FIFO order). */
  key: number;
  /** FIFO order: the members after `at` (undefined: `at` alone). */
  rest: Iterator<Queued> | undefined;
  /** Response-ratio order: the members not offered yet. */
  order: RatioOrder | undefined;
  /** Some backend serving the model is up and untried (fixed during a pump). */
  eligible: boolean;
  /** Its candidates below their cap, as of `dispatchesAt` pushes into the pump (only pushes change them). */
  candidates: BackendState[];
  dispatchesAt: number;
  /** FitGate.bound of `candidates`, computed when `boundAt` was `dispatchesAt` (-1: not yet). */
  bound: number;
  boundAt: number;
}

/**
 * Groups to ask again, in the order they were marked (as a Set keeps them), kept in a list with
 * each group's place on it: marking, checking and clearing after every pump (every metrics probe
 * marks them) without a hash lookup or a new table per clear.
 */
export class DirtyGroups {
  /**
   * Marked groups at their place in [0, end); an entry whose group's dirtyAt is not its index is
   * stale. Entries past `end` are left from earlier pumps: emptying the array (length = 0) would
   * drop its storage, to be allocated again by the next probe's marks.
   */
  readonly list: Group[] = [];
  end = 0;
  private count = 0;

  get size(): number {
    return this.count;
  }

  has(g: Group): boolean {
    return g.dirtyAt >= 0;
  }

  add(g: Group): void {
    if (g.dirtyAt >= 0) return;
    g.dirtyAt = this.end;
    this.list[this.end++] = g;
    this.count++;
  }

  delete(g: Group): void {
    if (g.dirtyAt < 0) return;
    g.dirtyAt = -1;
    this.count--;
  }

  clear(): void {
    const list = this.list;
    for (let i = 0; i < this.end; i++) if (list[i]!.dirtyAt === i) list[i]!.dirtyAt = -1;
    this.end = 0;
    this.count = 0;
  }
}

/** A request's priority in the router queue: RequestInfo.priority when a finite number, else 0. */
const NO_BACKENDS: readonly BackendState[] = [];

/** A new, empty group (its key in Scheduler.groups, or the model in plainGroups). */
export function newGroup(model: string, exclude: ReadonlySet<string>, priority: number, key: string): Group {
  return {
    model,
    exclude,
    priority,
    key,
    serving: NO_BACKENDS,
    servingAt: -1,
    members: new Map(),
    ratio: undefined,
    dirtyAt: -1,
    gate: undefined,
    gated: 0,
    allHeld: false,
  };
}

/** A request joining the router queue in group `g`, the `seq`th to. */
export function newQueued(req: RequestInfo, now: number, seq: number, g: Group): Queued {
  return {
    req,
    arrivedAt: req.arrivedAt,
    enqueuedAt: now,
    seq,
    group: g,
    size: NaN,
    sizeEpoch: NaN,
    slot: -1,
    walk: 0,
    fit: NaN,
    gateStamp: 0,
  };
}

export function priorityOf(req: RequestInfo): number {
  const p = req.priority;
  return p !== undefined && Number.isFinite(p) ? p : 0;
}

export function groupKey(model: string, exclude: ReadonlySet<string>, priority: number): string {
  const ex = [...exclude].sort();
  // A priority is a number, an excluded backend a string: the two kinds of key cannot collide.
  return JSON.stringify(priority === 0 ? [model, ...ex] : [model, priority, ...ex]);
}

/**
 * Whether cursor a's member is offered before b's: higher priority, then higher key (the queue
 * order's: 0 in FIFO order), then earlier in the queue.
 */
export function before(a: Cursor, b: Cursor): boolean {
  const pa = a.group.priority;
  const pb = b.group.priority;
  if (pa !== pb) return pa > pb;
  return a.key > b.key || (a.key === b.key && a.at.seq < b.at.seq);
}

/** A binary heap of cursors in offer order across groups (FIFO, or response ratio). */
export function heapPush(h: Cursor[], c: Cursor): void {
  let i = h.push(c) - 1;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (!before(c, h[p]!)) break;
    h[i] = h[p]!;
    i = p;
  }
  h[i] = c;
}

export function heapPop(h: Cursor[]): Cursor {
  const top = h[0]!;
  const last = h.pop()!;
  if (h.length > 0) {
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= h.length) break;
      const r = l + 1;
      const m = r < h.length && before(h[r]!, h[l]!) ? r : l;
      if (!before(h[m]!, last)) break;
      h[i] = h[m]!;
      i = m;
    }
    h[i] = last;
  }
  return top;
}

/** The group's next member in offer order (and its key in `c.key`); undefined when none is left. */
export function nextOf(c: Pick<Cursor, 'rest' | 'order' | 'key'>): Queued | undefined {
  if (c.order) {
    const q = c.order.pop();
    c.key = c.order.poppedKey;
    return q;
  }
  if (c.rest === undefined) return undefined; // a walk of one member
  const next = c.rest.next();
  return next.done ? undefined : next.value;
}
