import { z } from 'zod';
import { engineLoad } from '../../../engine-load.js';
import type { PluginContext, Scorer } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({ staleAfterMs: z.number().positive().default(3000) });

/**
 * llm-d's kv-cache-utilization-scorer: 1 − KV-cache usage. A backend that exports no usage (or a
 * stale one) scores 0.5, neither preferred nor avoided, so Ollama nodes mixed with vLLM ones are
 * not punished for what they cannot report.
 */
export function kvCacheUtilizationScorer(ctx: PluginContext): Scorer {
  const p = parseParams(Params, ctx.params, ctx.name);
  return {
    kind: 'scorer',
    type: 'kv-cache-utilization-scorer',
    name: ctx.name,
    score(_req, candidates, now, out) {
      for (let i = 0; i < candidates.length; i++) {
        const l = engineLoad(candidates[i]!, now, p.staleAfterMs);
        out[i] = l ? 1 - Math.min(1, Math.max(0, l.kvUsage)) : 0.5;
      }
    },
  };
}
