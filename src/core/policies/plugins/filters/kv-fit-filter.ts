import { z } from 'zod';
import type { BackendView } from '../../../types.js';
import type { Filter, PluginContext } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';
import { trackedHooks } from '../../framework/tracked-policy.js';
import { WorkloadParams, WorkloadTracker } from '../../shared/workload-tracker.js';

/**
 * The performance-aware router's "prevent requests from being queued at each model instance due to a lack of memory"
 * (§4.3) and C.3.2's "given that it can process this particular request": keeps backends whose KV
 * (kvCapacityTokens less the prompt and generated tokens of what this router has in flight there,
 * WorkloadTracker) has room for this request's prompt and predicted answer, or that are idle.
 * None left holds the request at the router (in arrival order unless `backfill`) until a completion frees
 * room — later binding than pushing into an engine that would queue or preempt it.
 * A shared tracker (the workload-aware and max-capacity built-ins) is fed by its owner.
 */
export const KvFitParams = WorkloadParams.extend({
  /**
   * false (default): a held request holds those behind it (FIFO, the seed's central queue).
   * true: later requests that fit somewhere go ahead of it (backfilling; an idle backend always
   * takes the held one, so it cannot starve while the fleet drains).
   */
  backfill: z.boolean().default(false),
});

export function kvFitFilter(ctx: PluginContext, shared?: WorkloadTracker): Filter {
  const p = parseParams(KvFitParams, ctx.params, ctx.name);
  const tracker = shared ?? new WorkloadTracker(p);
  const out: BackendView[] = [];
  /** Per candidate of the current call: 1 where the request fits. */
  let fit = new Uint8Array(8);
  return {
    kind: 'filter',
    type: 'kv-fit-filter',
    name: ctx.name,
    traits: {
      // Without backfill a request that fits nowhere holds the rest (load); with it, each is held
      // on its own: fits nowhere stands until a backend's flights change (KV only fills as answers
      // are generated).
      hold: p.backfill ? 'until-change' : 'load',
      holdsIgnoreMetrics: true,
      // It holds exactly a request that fits nowhere: need above every busy backend's free KV, none
      // idle. (A held request's need is its memoised prediction; the tracker forgets those only past
      // 65,536 undispatched requests, when a re-prediction may differ.)
      fitGate: {
        size(req) {
          const { promptTokens, expectedOut } = tracker.predict(req);
          return promptTokens + expectedOut;
        },
        bound(candidates, now) {
          let best = -Infinity;
          for (const c of candidates) {
            if (tracker.flights(c.name) === 0) return Infinity;
            // The same number fits() compares: capacity less the context at `now`.
            const free = tracker.freeTokens(c.name, now);
            if (free > best) best = free;
          }
          return best;
        },
      },
    },
    filter(req, candidates, now) {
      const { promptTokens, expectedOut } = tracker.predict(req);
      const need = promptTokens + expectedOut;
      const n = candidates.length;
      if (fit.length < n) fit = new Uint8Array(2 * n);
      let fitting = 0;
      for (let i = 0; i < n; i++) {
        fit[i] = tracker.fits(candidates[i]!.name, need, now) ? 1 : 0;
        fitting += fit[i]!;
      }
      if (fitting === n) return candidates;
      out.length = 0;
      for (let i = 0; i < n; i++) if (fit[i] === 1) out.push(candidates[i]!);
      return out;
    },
    ...(shared === undefined ? trackedHooks(tracker) : {}),
  };
}
