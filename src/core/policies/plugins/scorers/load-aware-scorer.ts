import { z } from 'zod';
import { queuedAt } from '../../../engine-load.js';
import type { PluginContext, Scorer } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({
  /** Waiting requests at which a backend counts as overloaded (score 0). */
  threshold: z.number().int().positive().default(128),
  staleAfterMs: z.number().positive().default(3000),
});

/**
 * Heimdall's load-aware-scorer. Its prose ("more queued → toward 1.0") contradicts its own rule
 * that higher means lighter; we follow llm-d's code, which Heimdall builds on: an empty queue
 * scores 0.5, otherwise 0.5·(1 − min(waiting, threshold)/threshold). Absolute, not relative, so
 * small differences between lightly loaded backends do not swing the total (unlike queue-scorer).
 */
export function loadAwareScorer(ctx: PluginContext): Scorer {
  const p = parseParams(Params, ctx.params, ctx.name);
  return {
    kind: 'scorer',
    type: 'load-aware-scorer',
    name: ctx.name,
    score(_req, candidates, now, out) {
      for (let i = 0; i < candidates.length; i++) {
        const w = queuedAt(candidates[i]!, now, p.staleAfterMs);
        out[i] = w <= 0 ? 0.5 : 0.5 * (1 - Math.min(w, p.threshold) / p.threshold);
      }
    },
  };
}
