import { HOLD } from '../../types.js';
import type { Policy, PolicyContext } from '../../types.js';
import { parseParams } from '../framework/params.js';
import { trackedHooks } from '../framework/tracked-policy.js';
import { WorkloadParams, WorkloadTracker } from '../shared/workload-tracker.js';

/**
 * Join the shortest queue, as the performance-aware router C.3.1 defines it for LLMs: the backend with the fewest
 * prompt and decode tokens still to process (prompts not yet prefilled, plus each in-flight
 * request's predicted answer less what it has likely generated). Ties: lowest index.
 */
export function jsq(ctx: PolicyContext): Policy {
  const tracker = new WorkloadTracker(parseParams(WorkloadParams, ctx.params, 'jsq'));
  return {
    name: 'jsq',
    pick(_req, candidates, now) {
      let best = candidates[0];
      let min = Infinity;
      for (const c of candidates) {
        const w = tracker.remainingTokens(c.name, now);
        if (w < min) {
          min = w;
          best = c;
        }
      }
      return best ?? HOLD.retry;
    },
    ...trackedHooks(tracker),
  };
}
