import { z } from 'zod';
import type { BackendView } from '../../../types.js';
import type { Picker, PluginContext } from '../../framework/plugin.js';
import { NEVER_HOLDS } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({});

/**
 * Smooth weighted round-robin over the backends' configured weights (nginx): each pick adds every
 * candidate's weight to its running score, takes the highest, and subtracts the total from it,
 * so 5:1:1 comes out as a,a,b,a,c,a,a rather than a burst of five. Scores ignored.
 */
export function weightedRoundRobinPicker(ctx: PluginContext): Picker {
  parseParams(Params, ctx.params, ctx.name);
  const current = new Map<string, number>();
  return {
    kind: 'picker',
    type: 'weighted-round-robin-picker',
    name: ctx.name,
    traits: NEVER_HOLDS,
    pick(_req, candidates) {
      let total = 0;
      let best: BackendView | undefined;
      let bestScore = -Infinity;
      for (const b of candidates) {
        const w = b.weight > 0 ? b.weight : 0;
        total += w;
        const score = (current.get(b.name) ?? 0) + w;
        current.set(b.name, score);
        if (score > bestScore) {
          bestScore = score;
          best = b;
        }
      }
      if (best === undefined) return [];
      current.set(best.name, bestScore - total);
      return [best];
    },
    onBackendRemoved(name) {
      current.delete(name);
    },
  };
}
