import { z } from 'zod';
import type { Picker, PluginContext } from '../../framework/plugin.js';
import { NEVER_HOLDS } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({ maxNumOfEndpoints: z.number().int().positive().default(1) });

/** Uniform choice, scores ignored (llm-d's random-picker); extra endpoints are a random retry order. */
export function randomPicker(ctx: PluginContext): Picker {
  const p = parseParams(Params, ctx.params, ctx.name);
  return {
    kind: 'picker',
    type: 'random-picker',
    name: ctx.name,
    traits: NEVER_HOLDS,
    pick(_req, candidates) {
      if (candidates.length === 0) return [];
      if (p.maxNumOfEndpoints === 1) return [candidates[Math.floor(ctx.random() * candidates.length)]!];
      const a = [...candidates];
      // Partial Fisher–Yates: only the endpoints returned are shuffled into place.
      const k = Math.min(p.maxNumOfEndpoints, a.length);
      for (let i = 0; i < k; i++) {
        const j = i + Math.floor(ctx.random() * (a.length - i));
        [a[i], a[j]] = [a[j]!, a[i]!];
      }
      return a.slice(0, k);
    },
  };
}
