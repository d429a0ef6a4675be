import { z } from 'zod';
import type { BackendView, PolicyContext } from '../../types.js';
import { kvFitFilter } from '../plugins/filters/kv-fit-filter.js';
import type { Filter } from '../framework/plugin.js';
import { trackedHooks } from '../framework/tracked-policy.js';
import { WorkloadTracker } from '../shared/workload-tracker.js';
import { maxScorePicker } from '../plugins/pickers/max-score-picker.js';
import type { ProfileDefinition } from '../framework/profile.js';
import { estimatedWaitScorer } from '../plugins/scorers/estimated-wait-scorer.js';
import { MixingParams, mixingImpactScorer } from '../plugins/scorers/mixing-impact-scorer.js';

const Params = MixingParams.extend({
  /** Weight of the mixing-impact score (the performance-aware router Eq. 1–2). */
  mixingWeight: z.number().nonnegative().default(1),
  /** Weight of the estimated-wait score (when this request would finish on each backend). */
  waitWeight: z.number().nonnegative().default(1),
  /** Hold a request at the router while it fits in no backend's KV (kv-fit-filter). */
  hold: z.boolean().default(true),
  /** Let later requests that fit go ahead of a held one (kv-fit-filter's backfill). */
  backfill: z.boolean().default(true),
});

/**
 * The performance-aware router's heuristic as a built-in profile: kv-fit-filter (hold while it fits nowhere), mixing-impact-scorer (where adding this request
 * disturbs the least prompt and decode work, with its predicted answer) plus estimated-wait-scorer
 * (where it would finish first), summed with weights and the best taken (ties round-robin). The
 * same profile can be written in EndpointPickerConfig YAML from the two scorers.
 */
export function workloadAware(ctx: PolicyContext): Omit<ProfileDefinition, 'name'> {
  const r = Params.safeParse(ctx.params);
  if (!r.success) {
    const msg = r.error.issues.map((i) => `${i.path.join('.') || '(params)'}: ${i.message}`).join('; ');
    throw new Error(`policy 'workload-aware' parameters: ${msg}`);
  }
  const { mixingWeight, waitWeight, hold, backfill, ...mixing } = r.data;
  // One tracker (predictor, in-flight work) for the filter and the mixing scorer; the filter's
  // copy of the hooks feeds it.
  const tracker = new WorkloadTracker(mixing);
  const pctx = (name: string, params: Record<string, unknown>) => ({
    name,
    params,
    random: ctx.random,
    lookup: () => undefined,
  });
  return {
    filters: hold
      ? [
          {
            ...heldFast(kvFitFilter(pctx('kv-fit-filter', { backfill }), tracker), tracker),
            ...trackedHooks(tracker),
          },
        ]
      : [],
    scorers: [
      {
        scorer: hold
          ? mixingImpactScorer(pctx('mixing-impact-scorer', mixing), tracker)
          : mixingImpactScorer(pctx('mixing-impact-scorer', mixing)),
        weight: mixingWeight,
      },
      { scorer: estimatedWaitScorer(pctx('estimated-wait-scorer', {})), weight: waitWeight },
    ],
    picker: maxScorePicker(pctx('max-score-picker', { tieBreaking: 'round-robin' })),
  };
}

const NONE: readonly BackendView[] = Object.freeze([]);

/**
 * kv-fit-filter's answer from memoised numbers (the same test, so the same decisions). With
 * backfill every held request is offered again on each pump (each completion, probe and
 * arrival), and hundreds may wait: per tracker state, instant and candidate list, each
 * candidate's idleness and free KV, whether any is idle and the most KV free on any are read
 * once, so a request that fits nowhere costs one comparison, and one that fits a pass over them.
 */
function heldFast(inner: Filter, tracker: WorkloadTracker): Filter {
  let at = NaN;
  let version = -1;
  const views: BackendView[] = [];
  const idle: boolean[] = [];
  const free: number[] = [];
  let anyIdle = false;
  let maxFree = -Infinity;
  const out: BackendView[] = [];
  return {
    ...inner,
    filter(req, candidates, now) {
      const n = candidates.length;
      let same = now === at && tracker.version === version && views.length === n;
      for (let i = 0; same && i < n; i++) same = views[i] === candidates[i];
      if (!same) {
        at = now;
        version = tracker.version;
        views.length = 0;
        anyIdle = false;
        maxFree = -Infinity;
        for (let i = 0; i < n; i++) {
          const c = candidates[i]!;
          views.push(c);
          idle[i] = tracker.flights(c.name) === 0;
          free[i] = tracker.freeTokens(c.name, now);
          if (idle[i]) anyIdle = true;
          else maxFree = Math.max(maxFree, free[i]!);
        }
      }
      const p = tracker.predict(req);
      const need = p.promptTokens + p.expectedOut;
      if (!anyIdle && !(maxFree >= need)) return NONE;
      // Where it fits (kv-fit-filter: idle, or room for its prompt and predicted answer).
      let all = true;
      for (let i = 0; all && i < n; i++) all = idle[i]! || free[i]! >= need;
      if (all) return candidates;
      out.length = 0;
      for (let i = 0; i < n; i++) if (idle[i]! || free[i]! >= need) out.push(candidates[i]!);
      return out;
    },
  };
}
