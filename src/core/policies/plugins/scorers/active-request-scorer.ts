import { z } from 'zod';
import type { PluginContext, Scorer } from '../../framework/plugin.js';
import { parseDurationMs } from '../../shared/duration.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({
  /**
   * After this, a request no longer counts as active (Heimdall: the engine is assumed to have
   * timed it out). 0 = never: then the router's own in-flight count is used (it sees every
   * completion), which is least-connections.
   */
  requestTimeout: z.union([z.string(), z.number()]).default('2m'),
});

/**
 * Heimdall's active-request-scorer: a backend with no active request scores 1, the one with the
 * most 0, the others in proportion ((max − active) / max). It counts requests itself from
 * dispatch to completion, and forgets one after `requestTimeout` as the seed specifies — the
 * router's own in-flight count never expires, so this is what makes the two differ.
 */
export function activeRequestScorer(ctx: PluginContext): Scorer {
  const p = parseParams(Params, ctx.params, ctx.name);
  const timeoutMs = parseDurationMs(p.requestTimeout, `${ctx.name}: requestTimeout`);
  // Per backend: request id → dispatch time (insertion order = age order, so expiry scans stop early).
  const active = new Map<string, Map<string, number>>();
  const countAt = (name: string, now: number): number => {
    const m = active.get(name);
    if (!m) return 0;
    for (const [id, t] of m) {
      if (now - t < timeoutMs) break;
      m.delete(id);
    }
    return m.size;
  };
  return {
    kind: 'scorer',
    type: 'active-request-scorer',
    name: ctx.name,
    traits: { readsMetrics: false },
    score(_req, candidates, now, out) {
      let max = 0;
      for (let i = 0; i < candidates.length; i++) {
        const a = timeoutMs === 0 ? candidates[i]!.inFlight : countAt(candidates[i]!.name, now);
        out[i] = a;
        if (a > max) max = a;
      }
      for (let i = 0; i < candidates.length; i++) out[i] = max > 0 ? (max - out[i]!) / max : 1;
    },
    onDispatch(req, backend, now) {
      if (timeoutMs === 0) return;
      let m = active.get(backend.name);
      if (!m) active.set(backend.name, (m = new Map()));
      m.set(req.id, now);
    },
    onComplete(req, backend) {
      active.get(backend.name)?.delete(req.id);
    },
    onBackendRemoved(name) {
      active.delete(name);
    },
    describe(name) {
      return { activeRequests: active.get(name)?.size ?? 0 };
    },
  };
}
