import { z } from 'zod';
import type { Filter, PluginContext } from '../plugin.js';
import { parseParams } from '../params.js';

const Params = z.strictObject({
  /** A backend takes a new request only while the router has fewer than this outstanding there. */
  maxOutstanding: z.number().int().positive().default(16),
});

/**
 * Selective pushing on outstanding requests (seed 003 §3.3, SP-O): keeps backends where the
 * router's own in-flight count is below a fixed threshold. None left holds the request in the
 * router queue; a completion frees a slot and the scheduler's pump pushes it. The seed's point is
 * that no fixed threshold fits LLM requests of unpredictable length — pending-filter adapts.
 */
export function outstandingFilter(ctx: PluginContext): Filter {
  const p = parseParams(Params, ctx.params, ctx.name);
  const max = p.maxOutstanding;
  return {
    kind: 'filter',
    type: 'outstanding-filter',
    name: ctx.name,
    filter(_req, candidates) {
      // Common case: every candidate passes, return the same array (no allocation).
      let i = 0;
      while (i < candidates.length && candidates[i]!.inFlight < max) i++;
      if (i === candidates.length) return candidates;
      const out = candidates.slice(0, i);
      for (i++; i < candidates.length; i++) if (candidates[i]!.inFlight < max) out.push(candidates[i]!);
      return out;
    },
  };
}
