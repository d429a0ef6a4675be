import { z } from 'zod';
import { engineWaiting } from '../../../engine-load.js';
import type { BackendView } from '../../../types.js';
import type { Filter, PluginContext } from '../../framework/plugin.js';
import { keepWhere } from './keep-where.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({
  /** Engine-waiting requests (after correction) a backend may have and still take one: 0 = none pending. */
  maxWaiting: z.number().int().min(0).default(0),
  /** How often engine metrics should be read while this filter is in use (live scrape, simulator probe). */
  probeIntervalMs: z.number().int().positive().default(50),
  /** A backend that has never reported metrics takes requests while the router has fewer outstanding there. */
  withoutMetricsMaxOutstanding: z.number().int().positive().default(1),
});

/**
 * Selective pushing on pending requests (SkyLB §3.3, SP-P): a backend takes a request only
 * while its engine reports no requests waiting outside the running batch (vLLM
 * `num_requests_waiting`, the emulated engine's queue). Between probes the last report is
 * corrected by what the router itself did (engine-load.ts): each push counts as waiting until a
 * completion or the next probe says otherwise, so a burst cannot pile onto a backend that looked
 * free at the last probe. The correction is exact for the router's own pushes and completions, so
 * old metrics stay usable; without any, the backend gets `withoutMetricsMaxOutstanding` at a time.
 */
export function pendingFilter(ctx: PluginContext): Filter {
  const p = parseParams(Params, ctx.params, ctx.name);
  const ok = (b: BackendView, now: number): boolean => {
    const w = engineWaiting(b, now, Infinity);
    return w >= 0 ? w <= p.maxWaiting : b.inFlight < p.withoutMetricsMaxOutstanding;
  };
  const kept: BackendView[] = [];
  return {
    kind: 'filter',
    type: 'pending-filter',
    name: ctx.name,
    traits: { hold: 'load', metricsIntervalMs: p.probeIntervalMs },
    filter: (_req, candidates, now) => keepWhere(candidates, ok, now, kept),
  };
}
