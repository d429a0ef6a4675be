import type { PluginContext, Scorer } from '../../framework/plugin.js';
import { parseEstimatedWaitParams, WaitEstimator } from '../../builtin/estimated-wait/index.js';

/**
 * The estimated-wait policy's prediction as a score, so it composes with other scorers: the
 * backend where this request would finish first scores 1, another finishing k times later 1/k.
 * A ratio rather than min–max, so one slow outlier does not flatten the differences between
 * the rest. Parameters are the estimated-wait policy's (alpha, defaultOutputTokens, …); it runs
 * the policy's estimator alone (estimated-wait/estimator.ts), not the whole policy.
 */
export function estimatedWaitScorer(ctx: PluginContext): Scorer {
  const model = new WaitEstimator(parseEstimatedWaitParams(ctx.params));
  return {
    kind: 'scorer',
    type: 'estimated-wait-scorer',
    name: ctx.name,
    score(req, candidates, now, out) {
      model.estimates(req, candidates, now, out);
      let min = Infinity;
      for (let i = 0; i < candidates.length; i++) if (out[i]! < min) min = out[i]!;
      for (let i = 0; i < candidates.length; i++) {
        const t = out[i]!;
        out[i] = t > 0 && Number.isFinite(t) ? (min > 0 ? min / t : t === min ? 1 : 0) : t === 0 ? 1 : 0;
      }
    },
    onDispatch: (req, backend, now) => model.onDispatch(req, backend, now),
    onComplete: (req, backend, report, now) => model.onComplete(req, backend, report, now),
    onBackendRemoved: (name) => model.onBackendRemoved(name),
    describe: (name) => model.describe(name),
  };
}
