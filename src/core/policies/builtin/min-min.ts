import { HOLD } from '../../types.js';
import type { Policy, PolicyContext } from '../../types.js';
import { parseParams } from '../framework/params.js';
import { trackedHooks } from '../framework/tracked-policy.js';
import { WorkloadParams, WorkloadTracker } from '../shared/workload-tracker.js';

/**
 * Min-min (the performance-aware router C.3.3, after Chen et al. 2013): a job's time on a machine is its prompt tokens
 * at the prefill rate plus the UPPER edge of its predicted answer bucket at the decode rate, after
 * the machine's ready time: 0 when the request fits in its KV now, else when its earliest
 * in-flight request should finish. The instances are homogeneous (as in the seed), so the fleet's
 * prior rates are used — learned per-backend rates lag and would herd requests onto whichever
 * backend last looked fastest; equal times go to the backend holding the fewest tokens. The router
 * offers requests one at a time in arrival order (the Policy interface has no view of the queue),
 * so min-min's "shortest job first" across waiting jobs reduces to minimum completion time.
 */
export function minMin(ctx: PolicyContext): Policy {
  const tracker = new WorkloadTracker(parseParams(WorkloadParams, ctx.params, 'min-min'));
  const edges = tracker.predictor.edges;
  const { priorPrefillS, priorDecodeS } = tracker.cfg;
  return {
    name: 'min-min',
    pick(req, candidates, now) {
      const { promptTokens, bucket } = tracker.predict(req);
      // The last bucket has no upper edge: twice its lower one.
      const upper = bucket < edges.length ? edges[bucket]! : 2 * edges[edges.length - 1]!;
      const cap = req.maxTokens !== undefined && req.maxTokens > 0 ? Math.min(upper, req.maxTokens) : upper;
      const own = promptTokens * priorPrefillS + cap * priorDecodeS;
      let best = candidates[0];
      let min = Infinity;
      let minCtx = Infinity;
      for (const c of candidates) {
        const ready = tracker.fits(c.name, promptTokens + cap, now)
          ? 0
          : tracker.earliestCompletionS(c.name, now);
        const t = ready + own;
        const ctxTokens = tracker.contextTokens(c.name, now);
        if (t < min || (t === min && ctxTokens < minCtx)) {
          min = t;
          minCtx = ctxTokens;
          best = c;
        }
      }
      return best ?? HOLD.retry;
    },
    ...trackedHooks(tracker),
  };
}
