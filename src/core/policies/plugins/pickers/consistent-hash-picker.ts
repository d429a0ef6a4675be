import { z } from 'zod';
import { HashRing } from '../../../prefix/hash-ring.js';
import { leastOutstanding } from '../../builtin/least-outstanding.js';
import type { Picker, PluginContext } from '../../framework/plugin.js';
import { NEVER_HOLDS } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({
  /** Ring points per backend (times its weight): more points, more even shares. */
  virtualNodes: z.number().int().positive().max(10_000).default(100),
});

/**
 * SkyLB-CH (SkyLB §3.2): consistent hashing of the request's session key (the
 * `x-session-token` header, OpenAI's `user`, or the configured header / body field) on a ring with
 * virtual nodes. Candidates are the available backends after the profile's filters; a key whose
 * home is not among them walks on to the next available point (SkyLB Listing 1, line 26).
 * Backends join the ring when first seen as candidates and leave it when removed from the fleet,
 * so unhealthy or busy ones keep their points and get their keys back when they return.
 * Requests without a key go to the least loaded candidate.
 */
export function consistentHashPicker(ctx: PluginContext): Picker & { readonly ring: HashRing } {
  const p = parseParams(Params, ctx.params, ctx.name);
  const ring = new HashRing(p.virtualNodes);
  // By registration index: weight on the ring (0 = not on it), and this pick's availability stamp.
  let weightOnRing = new Float64Array(64);
  let stamp = new Int32Array(64);
  const indexOf = new Map<string, number>();
  let epoch = 0;
  let cursor = 0;
  // Made once (it reads epoch and stamp as they are at each call): no closure per pick.
  const marked = (name: string): boolean => stamp[indexOf.get(name)!] === epoch;
  return {
    kind: 'picker',
    type: 'consistent-hash-picker',
    name: ctx.name,
    // Every candidate is on the ring (weights are positive), so a lookup always finds one; the
    // session key and in-flight counts decide, never engine metrics.
    traits: NEVER_HOLDS,
    ring,
    pick(req, candidates) {
      const n = candidates.length;
      if (n === 0) return [];
      const key = req.sessionKey;
      if (key === undefined || key === '') {
        const b = leastOutstanding(candidates, cursor)!;
        cursor = b.index + 1;
        return [b];
      }
      if (++epoch === 0x7fffffff) {
        stamp.fill(0);
        epoch = 1;
      }
      for (let i = 0; i < n; i++) {
        const b = candidates[i]!;
        if (b.index >= stamp.length) {
          const size = Math.max(b.index + 1, stamp.length * 2);
          const s = new Int32Array(size);
          s.set(stamp);
          stamp = s;
          const w = new Float64Array(size);
          w.set(weightOnRing);
          weightOnRing = w;
        }
        stamp[b.index] = epoch;
        if (weightOnRing[b.index] !== b.weight) {
          ring.add(b.name, b.weight);
          weightOnRing[b.index] = b.weight;
          indexOf.set(b.name, b.index);
        }
      }
      if (n === 1) return [candidates[0]!];
      const name = ring.lookup(key, marked);
      // The ring only holds names; candidates are few enough to find the chosen one by a scan.
      for (let i = 0; i < n; i++) if (candidates[i]!.name === name) return [candidates[i]!];
      return [];
    },
    onBackendRemoved(name) {
      ring.remove(name);
      const i = indexOf.get(name);
      if (i !== undefined) weightOnRing[i] = 0;
      indexOf.delete(name);
    },
  };
}
