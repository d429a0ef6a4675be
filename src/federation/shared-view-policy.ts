import { isHold } from '../core/types.js';
import type { BackendView, Policy, ResponseRatioOrder } from '../core/types.js';

/**
 * Several routers in front of one fleet (issue #19, SkyLB §3.1's hot-spot problem): each router
 * counts only its own pushes, so three least-loaded pickers see the same idle backend and herd
 * onto it. This wrapper shows the inner policy every backend's in-flight count as this router's
 * own (live, so its pushes since the last share are in) plus the other routers' at the last share.
 * Engine-reported load (SP-P pending counts, /metrics) is global already and passes through.
 * The scheduler still caps on the router's own count; shared caps are the allowance's business
 * (src/state/shared-view.ts).
 *
 * Every other hook of the inner policy passes through (issue #31): its holds (HOLD.load, the
 * order's holdsAll) read the shown counts, its traits are its own, and held requests keep the inner policy's order (estimated-wait's
 * response ratio). Dropping them made three estimated-wait routers sharing a view 1.86× one router's
 * mean E2E on replicas-3: their held requests went FIFO. A host that changes the others' counts
 * must tell its scheduler the backends changed (a hold on load is asked again only then).
 */
export function withSharedView(
  inner: Policy,
  others: (backend: string) => number,
  /**
   * Optional: the other routers' pushes and answers there since the engine metrics were last read
   * (added to the view's own counts since, which correct its metrics: estimated-wait's room).
   */
  othersSince?: (backend: string) => { readonly dispatched: number; readonly completed: number },
): Policy {
  const shown: BackendView[] = [];
  /** `candidates` with the others' in-flight added (the same array when none has any). */
  const show = (candidates: readonly BackendView[]): readonly BackendView[] => {
    shown.length = 0;
    let changed = false;
    for (const b of candidates) {
      const o = others(b.name);
      const since = othersSince?.(b.name);
      if (since !== undefined && (since.dispatched !== 0 || since.completed !== 0)) {
        changed = true;
        shown.push({
          ...b,
          inFlight: b.inFlight + o,
          dispatchedSinceMetrics: b.dispatchedSinceMetrics + since.dispatched,
          completedSinceMetrics: b.completedSinceMetrics + since.completed,
        });
        continue;
      }
      if (o > 0) changed = true;
      shown.push(o > 0 ? { ...b, inFlight: b.inFlight + o } : b);
    }
    return changed ? shown : candidates;
  };
  const wrapped: Policy = {
    name: inner.name,
    traits: inner.traits,
    pick(req, candidates, now) {
      const view = show(candidates);
      const chosen = inner.pick(req, view, now);
      if (isHold(chosen) || view === candidates) return chosen;
      // The scheduler wants its own view object back.
      const i = shown.indexOf(chosen);
      return i >= 0 ? candidates[i]! : chosen;
    },
  };
  const order = inner.queueOrder;
  const out: { -readonly [K in keyof Policy]: Policy[K] } = wrapped;
  if (order?.kind === 'response-ratio') {
    const holdsAll = order.holdsAll;
    out.queueOrder = holdsAll
      ? { ...bindAll(order), holdsAll: (candidates) => holdsAll.call(order, show(candidates)) }
      : bindAll(order);
  } else if (order) out.queueOrder = order;
  if (inner.onDispatch) out.onDispatch = inner.onDispatch.bind(inner);
  if (inner.onComplete) out.onComplete = inner.onComplete.bind(inner);
  if (inner.onBackendRemoved) out.onBackendRemoved = inner.onBackendRemoved.bind(inner);
  if (inner.describe) out.describe = inner.describe.bind(inner);
  if (inner.requestClass) out.requestClass = inner.requestClass.bind(inner);
  if (inner.explainLast) out.explainLast = inner.explainLast.bind(inner);
  return wrapped;
}

/** The order's methods bound to it (they may use `this`). */
function bindAll(rr: ResponseRatioOrder): ResponseRatioOrder {
  return {
    kind: 'response-ratio',
    size: rr.size.bind(rr),
    ...(rr.sizes ? { sizes: rr.sizes.bind(rr) } : {}),
    epoch: rr.epoch.bind(rr),
  };
}
