import type { BackendView, Policy } from '../core/types.js';

/**
 * Several routers in front of one fleet (issue #19, SkyLB §3.1's hot-spot problem): each router
 * counts only its own pushes, so three least-loaded pickers see the same idle backend and herd
 * onto it. This wrapper shows the inner policy every backend's in-flight count as this router's
 * own (live, so its pushes since the last share are in) plus the other routers' at the last share.
 * Engine-reported load (SP-P pending counts, /metrics) is global already and passes through.
 * The scheduler still caps on the router's own count; shared caps are the allowance's business
 * (src/state/shared-view.ts).
 */
export function withSharedView(inner: Policy, others: (backend: string) => number): Policy {
  const shown: BackendView[] = [];
  const wrapped: Policy = {
    name: inner.name,
    metricsIntervalMs: inner.metricsIntervalMs,
    pick(req, candidates, now) {
      shown.length = 0;
      let changed = false;
      for (const b of candidates) {
        const o = others(b.name);
        if (o > 0) changed = true;
        shown.push(o > 0 ? { ...b, inFlight: b.inFlight + o } : b);
      }
      const chosen = inner.pick(req, changed ? shown : candidates, now);
      if (!chosen || !changed) return chosen;
      // The scheduler wants its own view object back.
      const i = shown.indexOf(chosen);
      return i >= 0 ? candidates[i] : chosen;
    },
  };
  if (inner.onDispatch) wrapped.onDispatch = inner.onDispatch.bind(inner);
  if (inner.onComplete) wrapped.onComplete = inner.onComplete.bind(inner);
  if (inner.onBackendRemoved) wrapped.onBackendRemoved = inner.onBackendRemoved.bind(inner);
  if (inner.describe) wrapped.describe = inner.describe.bind(inner);
  if (inner.requestClass) wrapped.requestClass = inner.requestClass.bind(inner);
  return wrapped;
}
