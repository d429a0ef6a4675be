import { HOLD } from '../../types.js';
import type { Policy, PolicyContext } from '../../types.js';
import { KvFitParams, kvFitFilter } from '../plugins/filters/kv-fit-filter.js';
import { parseParams } from '../framework/params.js';
import { policyPicker } from '../plugins/pickers/policy-picker.js';
import type { ProfileDefinition } from '../framework/profile.js';
import { trackedHooks } from '../framework/tracked-policy.js';
import { WorkloadTracker } from '../shared/workload-tracker.js';

/**
 * Maximum capacity usage (the performance-aware router C.3.2): the head request goes to the backend with the most KV
 * free now (kvCapacityTokens less the prompt and generated tokens of what is in flight there),
 * among those where its prompt and predicted answer fit (kv-fit-filter); when it fits nowhere it
 * waits at the router, in arrival order, until a completion frees room (the seed re-tries every
 * second; our hosts re-offer held requests on every completion).
 */
export function maxCapacityPolicy(tracker: WorkloadTracker): Policy {
  return {
    name: 'max-capacity',
    pick(_req, candidates, now) {
      let best;
      let max = -Infinity;
      for (const c of candidates) {
        const free = tracker.freeTokens(c.name, now);
        if (free > max) {
          max = free;
          best = c;
        }
      }
      return best ?? HOLD.retry;
    },
    ...trackedHooks(tracker),
  };
}

export function maxCapacity(ctx: PolicyContext): Omit<ProfileDefinition, 'name'> {
  const { backfill, ...rest } = parseParams(KvFitParams, ctx.params, 'max-capacity');
  const tracker = new WorkloadTracker(rest);
  const fctx = { name: 'kv-fit-filter', params: { backfill }, random: ctx.random, lookup: () => undefined };
  return {
    filters: [kvFitFilter(fctx, tracker)],
    scorers: [],
    picker: policyPicker(maxCapacityPolicy(tracker)),
  };
}
