/**
 * What several simulated routers in front of one fleet share (issue #31), per router: the others'
 * in-flight counts (`shared-view`, synced; `shared-state`, published), the others' pushes and
 * answers applied to this router's own policy (`shared-state`: estimated-wait's flights, prefix
 * tries, workload classes as one router's), and the requests the others hold in their queues (one
 * queue order across routers). federation.ts runs the routers; this is the policy side.
 */
import { HOLD } from '../core/types.js';
import type { BackendView, CompletionReport, Policy, RequestInfo } from '../core/types.js';
import type { Scheduler } from '../core/scheduler.js';
import { withSharedView } from '../federation/shared-view-policy.js';
import type { SharingMode } from './federation-modes.js';

/**
 * What one router publishes for the others (shared-state): a push (no report), an answer, or a
 * request it starts or stops holding in its queue (`hold`).
 */
export interface Shared {
  readonly req: RequestInfo;
  readonly backend: string;
  readonly report: CompletionReport | undefined;
  readonly hold?: boolean;
  /** push: the request was held in its router's queue (the push ends that hold). */
  readonly wasHeld?: boolean;
}

/** One router's view of the others. */
export interface SharedViews {
  /** Other routers' in-flight per backend at the last share (shared-view, shared-state). */
  readonly others: Map<string, number>;
  /** shared-state: the others' pushes and answers per backend since this router's last probe. */
  readonly since: Map<string, { dispatched: number; completed: number }>;
  /** shared-state: requests the other routers hold in their queues, by id. */
  readonly remoteHeld: Map<string, RequestInfo>;
  /**
   * shared-state: held requests whose push came before their hold (sequenced pushes are heard at
   * once, holds `lagMs` late): the hold, when it arrives, is over already.
   */
  readonly pushedBeforeHold: Set<string>;
  /**
   * shared-state: whether a held request's push ends its hold here (the lag is large for its size:
   * `oneQueueOrder`); the unhold does otherwise.
   */
  pushEndsHold: (req: RequestInfo) => boolean;
  /** shared-state: the policy the others' pushes and answers are applied to. */
  readonly inner: Policy;
  /** shared-state: backends whose shared state changed since this router's scheduler was told. */
  readonly changed: Set<string>;
}

const NONE_SINCE = { dispatched: 0, completed: 0 } as const;

/**
 * The policy a router's scheduler runs under `sharing`, and its views of the others. Under
 * shared-state every push and answer is handed to `publish` (after the policy saw it).
 */
export function sharedPolicy(
  inner: Policy,
  sharing: SharingMode | undefined,
  publish: (s: Shared) => void,
  arrivalOrder: (req: RequestInfo) => number,
  lagMs = 0,
): { policy: Policy; views: SharedViews } {
  const views: SharedViews = {
    others: new Map<string, number>(),
    since: new Map<string, { dispatched: number; completed: number }>(),
    remoteHeld: new Map<string, RequestInfo>(),
    pushedBeforeHold: new Set<string>(),
    pushEndsHold: () => true,
    inner,
    changed: new Set<string>(),
  };
  const { others, since } = views;
  if (sharing === 'shared-view') return { policy: withSharedView(inner, (n) => others.get(n) ?? 0), views };
  if (sharing !== 'shared-state') return { policy: inner, views };
  const policy = withSharedView(
    inner,
    (n) => others.get(n) ?? 0,
    (n) => since.get(n) ?? NONE_SINCE,
  );
  const onDispatch = policy.onDispatch;
  const onComplete = policy.onComplete;
  policy.onDispatch = (req, b, at) => {
    onDispatch?.(req, b, at);
    publish({ req, backend: b.name, report: undefined });
  };
  policy.onComplete = (req, b, report, at) => {
    onComplete?.(req, b, report, at);
    publish({ req, backend: b.name, report });
  };
  oneQueueOrder(policy, views, arrivalOrder, lagMs);
  return { policy, views };
}

/**
 * A round trip of at least this fraction of a request's size (service seconds) is a large lag for it
 * (replicas-3, lagged 10 ms, N = 2-8, both seeds: 0.05 let N = 8 reach 1.03x; 0.2 undid half the
 * 500 ms fix at N = 8).
 */
const LARGE_LAG = 0.1;

/**
 * One queue across routers: a request waits while another router holds one of its model that goes
 * first (higher response ratio, then earlier arrival at the routers, as one router's queue orders
 * them); that router takes the room when it hears of it. Only for policies that order held
 * requests by response ratio.
 *
 * A higher ratio counts only if it is still higher once this request has waited a round trip
 * (two lags): the hold was heard a lag late and the room this request leaves waits a lag for the
 * other router to hear of it (replicas-3, 500 ms, N = 3: up to 1.35 / 1.76x one router with every
 * higher ratio obeyed; 10 ms sequenced, N = 2: 1.068x with no margin, 1.050x with one lag).
 * Equal ratios keep the arrival order. Each router sizes requests its own way (what it learned),
 * so with a margin 3 routers could each wait for the next (replicas-3, 200 ms: 73 of 800 requests
 * held to the end, no engine busy): a router that sees every candidate idle waits for nobody.
 * (Ranking a held request by the size published with its hold made the order consistent but
 * misordered requests whose size changed while they waited: 1.04-1.47x one router.)
 *
 * The push ending a hold and the two-lag margin apply only to a request whose size is at most
 * 1 / LARGE_LAG round trips: at a lag small against the service time they cost (replicas-3, 10 ms,
 * lagged pushes: N = 5 1.153x, N = 8 1.155x one router with them, 0.97 / 1.02x without).
 */
function oneQueueOrder(
  policy: Policy,
  views: SharedViews,
  arrivalOrder: (req: RequestInfo) => number,
  lagMs: number,
): void {
  const rr = policy.queueOrder?.kind === 'response-ratio' ? policy.queueOrder : undefined;
  if (!rr) return;
  const { remoteHeld, others } = views;
  const pick = policy.pick.bind(policy);
  // The round trip (s) is large for a request of this size (s).
  const largeLag = (size: number): boolean => (2 * lagMs) / 1000 >= LARGE_LAG * size;
  views.pushEndsHold = (q) => largeLag(rr.size(q));
  // Every candidate idle in this router's view (its own and the others' in flight): nobody to wait for.
  const idle = (c: readonly BackendView[]): boolean => {
    for (const b of c) if (b.inFlight > 0 || (others.get(b.name) ?? 0) > 0) return false;
    return true;
  };
  const ratio = (q: RequestInfo, size: number, at: number): number =>
    (Math.max(0, at - q.arrivedAt) / 1000 + size) / size;
  const outranked = (req: RequestInfo, at: number): boolean => {
    let size = NaN;
    let mine = NaN;
    let later = NaN;
    for (const q of remoteHeld.values()) {
      if (q.model !== req.model) continue;
      if (size !== size) {
        size = rr.size(req);
        mine = ratio(req, size, at);
        later = largeLag(size) ? ratio(req, size, at + 2 * lagMs) : mine;
      }
      const theirs = ratio(q, rr.size(q), at);
      // Equal ratios (a burst that arrived at one instant, of one size): the earlier arrival
      // first, as one router's queue does. By arrivedAt alone neither went first, so each router
      // let all its own ties go before the others' (replicas-3, N = 3: TTFT p90 1.156x one router).
      if (theirs > later || (theirs === mine && arrivalOrder(q) < arrivalOrder(req))) return true;
    }
    return false;
  };
  // Deferred for another router's request: not a hold on load (asked again at every pump).
  policy.pick = (req, c, at) =>
    remoteHeld.size > 0 && outranked(req, at) && !idle(c) ? HOLD.retry : pick(req, c, at);
}

/**
 * What another router published reaching this one (`at`: ms): its counts and its policy's state.
 * True when a backend's shared state changed (the scheduler must be told: see `views.changed`).
 */
export function receiveShared(views: SharedViews, scheduler: Scheduler, s: Shared, at: number): boolean {
  const { remoteHeld, pushedBeforeHold } = views;
  if (s.hold !== undefined) {
    if (!s.hold) remoteHeld.delete(s.req.id);
    else if (!pushedBeforeHold.delete(s.req.id)) remoteHeld.set(s.req.id, s.req);
    return false;
  }
  // A held request's push ends its hold: sequenced pushes are heard at once, the unhold a lag late
  // (replicas-3, 500 ms, N = 3: 1.22 / 1.65x one router while the stale hold was obeyed).
  if (s.wasHeld && views.pushEndsHold(s.req) && !remoteHeld.delete(s.req.id)) pushedBeforeHold.add(s.req.id);
  const view = scheduler.backend(s.backend);
  if (!view) return false;
  views.others.set(s.backend, (views.others.get(s.backend) ?? 0) + (s.report ? -1 : 1));
  let c = views.since.get(s.backend);
  if (!c) views.since.set(s.backend, (c = { dispatched: 0, completed: 0 }));
  if (s.report) c.completed++;
  else c.dispatched++;
  if (s.report) views.inner.onComplete?.(s.req, view, s.report, at);
  else views.inner.onDispatch?.(s.req, view, at);
  views.changed.add(s.backend);
  return true;
}

/** A router's sync (shared-view): the others' in-flight per backend as read back; the backends whose count changed. */
export function syncOthers(
  views: SharedViews,
  counts: readonly (readonly (readonly [string, number])[] | undefined)[],
): string[] {
  const before = new Map(views.others);
  views.others.clear();
  for (const list of counts) {
    if (!list) continue;
    for (const [n, c] of list) views.others.set(n, (views.others.get(n) ?? 0) + c);
  }
  const changed: string[] = [];
  for (const [n, c] of views.others) if ((before.get(n) ?? 0) !== c) changed.push(n);
  return changed;
}
