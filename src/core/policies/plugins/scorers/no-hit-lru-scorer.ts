import { z } from 'zod';
import type { PluginContext, Scorer } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';
import { isPrefixHitSource, prefixCacheScorer } from './prefix-cache-scorer.js';

const Params = z.strictObject({
  /** The prefix plugin that says whether a request is hot (has a prefix hit somewhere). */
  prefixPluginName: z.string().min(1).default('prefix-cache-scorer'),
  /** Backends tracked; others score 1. */
  lruSize: z.number().int().positive().default(1024),
});

/**
 * Heimdall's no-hit-lru-scorer: cold requests (no prefix hit on any backend) go round the fleet in
 * least-recently-used order, so every backend's KV cache fills evenly. For a cold request, the
 * backend that most recently took a cold one scores 0, older ones more (position / tracked), and
 * backends not tracked (never took one, or beyond lruSize) 1. Hot requests: 0.5 everywhere, so
 * the prefix scorer decides.
 */
export function noHitLruScorer(ctx: PluginContext): Scorer {
  const p = parseParams(Params, ctx.params, ctx.name);
  const declared = ctx.lookup(p.prefixPluginName);
  if (declared !== undefined && !isPrefixHitSource(declared)) {
    throw new Error(`${ctx.name}: prefixPluginName '${p.prefixPluginName}' is not a prefix plugin`);
  }
  // Heimdall's example enables no-hit-lru-scorer without declaring the prefix plugin: then it
  // keeps a private one (default parameters) that only tells hot from cold.
  const prefix =
    declared ??
    prefixCacheScorer({ name: p.prefixPluginName, params: {}, random: ctx.random, lookup: () => undefined });
  let scratch = new Float64Array(16);
  /** Backends that took cold requests, least recent first (Map order). */
  const coldLru = new Map<string, true>();
  let coldReq: string | undefined;
  return {
    kind: 'scorer',
    type: 'no-hit-lru-scorer',
    name: ctx.name,
    uses: [prefix],
    score(req, candidates, _now, out) {
      let hit = prefix.prefixHit(req);
      if (hit === undefined) {
        // The prefix plugin is not scored in this profile (or comes later): ask it now.
        if (scratch.length < candidates.length) scratch = new Float64Array(candidates.length * 2);
        const s = scratch.subarray(0, candidates.length).fill(0);
        prefix.score(req, candidates, _now, s);
        hit = prefix.prefixHit(req);
      }
      if (hit !== false) {
        // Hot: the prefix scorer decides.
        out.fill(0.5);
        coldReq = undefined;
        return;
      }
      coldReq = req.id;
      const n = coldLru.size;
      let pos = 0;
      const rank = new Map<string, number>();
      // Newest gets 0: walk from the oldest, giving (n − 1 − age index) … computed as position from the newest.
      for (const name of coldLru.keys()) rank.set(name, n - 1 - pos++);
      for (let i = 0; i < candidates.length; i++) {
        const r = rank.get(candidates[i]!.name);
        out[i] = r === undefined ? 1 : r / n;
      }
    },
    onDispatch(req, backend) {
      if (req.id !== coldReq) return;
      coldLru.delete(backend.name);
      coldLru.set(backend.name, true);
      if (coldLru.size > p.lruSize) coldLru.delete(coldLru.keys().next().value!);
    },
    onBackendRemoved(name) {
      coldLru.delete(name);
    },
  };
}
