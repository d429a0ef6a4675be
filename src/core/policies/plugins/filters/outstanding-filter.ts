import { z } from 'zod';
import type { BackendView } from '../../../types.js';
import type { Filter, PluginContext } from '../../framework/plugin.js';
import { keepWhere } from './keep-where.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({
  /** A backend takes a new request only while the router has fewer than this outstanding there. */
  maxOutstanding: z.number().int().positive().default(16),
});

/**
 * Selective pushing on outstanding requests (SkyLB §3.3, SP-O): keeps backends where the
 * router's own in-flight count is below a fixed threshold. None left holds the request in the
 * router queue; a completion frees a slot and the scheduler's pump pushes it. The seed's point is
 * that no fixed threshold fits LLM requests of unpredictable length — pending-filter adapts.
 */
export function outstandingFilter(ctx: PluginContext): Filter {
  const p = parseParams(Params, ctx.params, ctx.name);
  const max = p.maxOutstanding;
  const ok = (b: BackendView): boolean => b.inFlight < max;
  const kept: BackendView[] = [];
  return {
    kind: 'filter',
    type: 'outstanding-filter',
    name: ctx.name,
    // The router's own in-flight counts only: a probe's metrics lift none of its holds.
    traits: { hold: 'load', holdsIgnoreMetrics: true, readsMetrics: false },
    filter: (_req, candidates, now) => keepWhere(candidates, ok, now, kept),
  };
}
