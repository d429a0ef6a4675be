import { z } from 'zod';
import { queuedAt } from '../../../engine-load.js';
import type { PluginContext, Scorer } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({
  /** Engine metrics older than this are not trusted; the router's in-flight count stands in. */
  staleAfterMs: z.number().positive().default(3000),
});

/**
 * Heimdall / llm-d queue-scorer: the backend with the fewest queued requests scores 1, the most
 * 0, the rest in proportion. Queued = the engine's waiting count, corrected by what this router
 * pushed and saw finish since the scrape (see engine-load.ts). All equal: every backend scores 1.
 */
export function queueScorer(ctx: PluginContext): Scorer {
  const p = parseParams(Params, ctx.params, ctx.name);
  return {
    kind: 'scorer',
    type: 'queue-scorer',
    name: ctx.name,
    score(_req, candidates, now, out) {
      let min = Infinity;
      let max = -Infinity;
      for (let i = 0; i < candidates.length; i++) {
        const q = queuedAt(candidates[i]!, now, p.staleAfterMs);
        out[i] = q;
        if (q < min) min = q;
        if (q > max) max = q;
      }
      const range = max - min;
      for (let i = 0; i < candidates.length; i++) out[i] = range > 0 ? (max - out[i]!) / range : 1;
    },
  };
}
