import { z } from 'zod';
import type { PluginContext, Scorer } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({
  /** Sessions remembered (least recently used forgotten first). */
  maxSessions: z.number().int().positive().default(100_000),
});

/**
 * Heimdall's session-affinity-scorer: 1 for the backend that last served this session (the
 * `x-session-token` header, or OpenAI's `user`), 0 elsewhere. Indirectly prefix-cache aware:
 * a conversation's next turn lands where its history is cached.
 */
export function sessionAffinityScorer(ctx: PluginContext): Scorer {
  const p = parseParams(Params, ctx.params, ctx.name);
  const last = new Map<string, string>();
  return {
    kind: 'scorer',
    type: 'session-affinity-scorer',
    name: ctx.name,
    score(req, candidates, _now, out) {
      const key = req.sessionKey;
      const home = key === undefined ? undefined : last.get(key);
      for (let i = 0; i < candidates.length; i++)
        out[i] = home !== undefined && candidates[i]!.name === home ? 1 : 0;
    },
    onDispatch(req, backend) {
      const key = req.sessionKey;
      if (key === undefined) return;
      last.delete(key); // re-insert: Map order is the LRU order
      last.set(key, backend.name);
      if (last.size > p.maxSessions) last.delete(last.keys().next().value!);
    },
    onBackendRemoved(name) {
      for (const [k, v] of last) if (v === name) last.delete(k);
    },
  };
}
