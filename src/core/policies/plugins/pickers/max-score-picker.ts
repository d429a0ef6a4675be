import { z } from 'zod';
import type { BackendView } from '../../../types.js';
import type { Picker, PluginContext } from '../../framework/plugin.js';
import { NEVER_HOLDS } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({
  /** Endpoints returned: the best first, the rest are the request's retry order. */
  maxNumOfEndpoints: z.number().int().positive().default(1),
  /** Equal scores: llm-d shuffles (random); round-robin spreads ties evenly and deterministically. */
  tieBreaking: z.enum(['random', 'round-robin']).default('random'),
});

/** Highest total score wins (llm-d's max-score-picker). */
export function maxScorePicker(ctx: PluginContext): Picker {
  const p = parseParams(Params, ctx.params, ctx.name);
  let cursor = 0;
  const EPS = 1e-9;
  return {
    kind: 'picker',
    type: 'max-score-picker',
    name: ctx.name,
    traits: NEVER_HOLDS,
    // Round-robin ties start after the last backend picked or pushed to (issue #31: routers that
    // share their pushes share the order; a pick is pushed where it was picked, so one router's
    // order is unchanged).
    onDispatch(_req, backend) {
      cursor = backend.index + 1;
    },
    pick(_req, candidates, scores) {
      const n = candidates.length;
      if (n === 0) return [];
      if (p.maxNumOfEndpoints === 1) {
        // Hot path: one pass, no sort, no allocation beyond the result.
        let best = -Infinity;
        for (let i = 0; i < n; i++) if (scores[i]! > best) best = scores[i]!;
        let chosen: BackendView | undefined;
        if (p.tieBreaking === 'random') {
          let ties = 0;
          for (let i = 0; i < n; i++) {
            // Reservoir sampling over the tied candidates: uniform without a second array.
            if (scores[i]! >= best - EPS && ctx.random() * ++ties < 1) chosen = candidates[i];
          }
        } else {
          let wrap: BackendView | undefined;
          for (let i = 0; i < n; i++) {
            if (scores[i]! < best - EPS) continue;
            const b = candidates[i]!;
            if (b.index >= cursor) {
              if (chosen === undefined || b.index < chosen.index) chosen = b;
            } else if (wrap === undefined || b.index < wrap.index) wrap = b;
          }
          chosen ??= wrap;
          cursor = chosen!.index + 1;
        }
        return [chosen!];
      }
      const order = candidates.map((b, i) => ({ b, s: scores[i]!, r: ctx.random() }));
      order.sort((x, y) =>
        Math.abs(y.s - x.s) > EPS
          ? y.s - x.s
          : p.tieBreaking === 'random'
            ? x.r - y.r
            : x.b.index - y.b.index,
      );
      return order.slice(0, p.maxNumOfEndpoints).map((o) => o.b);
    },
  };
}
