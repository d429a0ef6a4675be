import type { Picker, PluginContext } from '../../framework/plugin.js';
import { NEVER_HOLDS } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';
import { nextInRotation } from '../../shared/rotation.js';
import { z } from 'zod';

const Params = z.strictObject({});

/** Rotates over backends in registration order, skipping non-candidates; scores ignored. */
export function roundRobinPicker(ctx: PluginContext): Picker {
  parseParams(Params, ctx.params, ctx.name);
  let next = 0;
  return {
    kind: 'picker',
    type: 'round-robin-picker',
    name: ctx.name,
    traits: NEVER_HOLDS,
    pick(_req, candidates) {
      const chosen = nextInRotation(candidates, next);
      if (!chosen) return [];
      next = chosen.index + 1;
      return [chosen];
    },
  };
}
