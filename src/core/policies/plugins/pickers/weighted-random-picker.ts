import { z } from 'zod';
import type { Picker, PluginContext } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({ maxNumOfEndpoints: z.number().int().positive().default(1) });

/**
 * Chance proportional to score (llm-d's weighted-random-picker): spreads load where max-score
 * would herd every request onto the single best backend between metric updates. Several endpoints
 * are drawn without replacement (Efraimidis–Spirakis keys u^(1/w)). All-zero scores: uniform.
 */
export function weightedRandomPicker(ctx: PluginContext): Picker {
  const p = parseParams(Params, ctx.params, ctx.name);
  return {
    kind: 'picker',
    type: 'weighted-random-picker',
    name: ctx.name,
    pick(_req, candidates, scores) {
      const n = candidates.length;
      if (n === 0) return [];
      let total = 0;
      for (let i = 0; i < n; i++) total += scores[i]!;
      if (p.maxNumOfEndpoints === 1) {
        if (!(total > 0)) return [candidates[Math.floor(ctx.random() * n)]!];
        let x = ctx.random() * total;
        for (let i = 0; i < n; i++) {
          x -= scores[i]!;
          if (x < 0) return [candidates[i]!];
        }
        return [candidates[n - 1]!];
      }
      const keyed = candidates.map((b, i) => {
        const w = total > 0 ? scores[i]! : 1;
        return { b, k: w > 0 ? Math.pow(ctx.random(), 1 / w) : -1 + ctx.random() * 1e-9 };
      });
      keyed.sort((a, b) => b.k - a.k);
      return keyed.slice(0, p.maxNumOfEndpoints).map((e) => e.b);
    },
  };
}
