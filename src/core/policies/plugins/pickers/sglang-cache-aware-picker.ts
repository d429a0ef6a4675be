import { z } from 'zod';
import type { PrefixTrie } from '../../../prefix/prefix-trie.js';
import type { BackendView } from '../../../types.js';
import type { Picker, PluginContext } from '../../framework/plugin.js';
import { NEVER_HOLDS } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';
import { trieParams, TrieRouting } from '../../builtin/trie-routing.js';

const Params = z.strictObject({
  ...trieParams,
  /** SGLang `--cache-threshold`: a match over this share of the prompt follows the match. */
  cacheThreshold: z.number().min(0).max(1).default(0.5),
  /** SGLang `--balance-abs-threshold`: imbalanced when busiest − idlest exceeds this… */
  balanceAbsThreshold: z.number().min(0).default(32),
  /** …and SGLang `--balance-rel-threshold`: busiest > this × idlest. */
  balanceRelThreshold: z.number().min(1).default(1.0001),
});

export type SglangCacheAwarePickerParams = z.input<typeof Params>;

/** What the picker decided for the last request (tests, explain). */
export interface SglangCacheAwareDecision {
  readonly matchedChars: number;
  /** 'imbalanced': shortest queue; 'prefix': the longest match; 'smallest-tree': no good match. */
  readonly reason: 'imbalanced' | 'prefix' | 'smallest-tree';
}

/**
 * SGLang router's `cache_aware` policy (sgl-router, the router SkyLB §5 uses as its baseline and
 * extends with selective pushing), over the same approximate prefix trie as `prefix-trie`:
 *  1. when the candidates are imbalanced — busiest − idlest in flight > balanceAbsThreshold and
 *     busiest > balanceRelThreshold × idlest — the least loaded candidate;
 *  2. else, when the longest match covers more than cacheThreshold of the prompt, the backend
 *     holding it (the first sent it, among the candidates);
 *  3. else the candidate holding the least of the trie (SGLang: the smallest tree, "most cache
 *     room"), ties to the least loaded.
 * Unlike `prefix-trie`, a short match is balanced by what each backend was sent over time, not by
 * its load now, and load only wins once the spread passes an absolute threshold: this is what
 * lets a blind-pushing cache-aware router pile requests onto some replicas while others idle.
 * The candidates are those the profile's filters leave (blind, SP-O or SP-P), as in SkyLB.
 */
export function sglangCacheAwarePicker(ctx: PluginContext): Picker & {
  readonly trie: PrefixTrie;
  lastDecision(): SglangCacheAwareDecision | undefined;
} {
  const p = parseParams(Params, ctx.params, ctx.name);
  const routing = new TrieRouting(p);
  const { trie, marks } = routing;
  // The last decision, kept as fields (an object per pick would be garbage for every request).
  let lastChars = -1;
  let lastReason: SglangCacheAwareDecision['reason'] = 'prefix';
  const held = (b: BackendView): number => {
    const id = marks.idOf(b);
    return id < 0 ? 0 : trie.heldBy(id);
  };

  return {
    kind: 'picker',
    type: 'sglang-cache-aware-picker',
    name: ctx.name,
    // In-flight counts and its trie decide; it never holds (a blind profile of it needs no probes).
    traits: NEVER_HOLDS,
    trie,
    lastDecision: () => (lastChars < 0 ? undefined : { matchedChars: lastChars, reason: lastReason }),
    pick(req, candidates) {
      const n = candidates.length;
      if (n === 0) return [];
      let idlest = candidates[0]!;
      let max = idlest.inFlight;
      for (let i = 1; i < n; i++) {
        const b = candidates[i]!;
        if (b.inFlight < idlest.inFlight) idlest = b;
        if (b.inFlight > max) max = b.inFlight;
      }
      const min = idlest.inFlight;
      if (max - min > p.balanceAbsThreshold && max > min * p.balanceRelThreshold) {
        lastChars = 0;
        lastReason = 'imbalanced';
        return [idlest];
      }
      marks.mark(candidates);
      const k = routing.keysOf(req);
      const m = k.length > 0 ? trie.match(k, marks.isAvailable) : undefined;
      const indexed = Math.min(req.promptText.length, p.maxPrefixChars);
      if (m !== undefined && m.owners.length > 0 && m.chars > p.cacheThreshold * indexed) {
        lastChars = m.chars;
        lastReason = 'prefix';
        return [candidates[marks.position(m.owners[0]!)]!];
      }
      let best = candidates[0]!;
      let bestHeld = held(best);
      for (let i = 1; i < n; i++) {
        const b = candidates[i]!;
        const h = held(b);
        if (h < bestHeld || (h === bestHeld && b.inFlight < best.inFlight)) {
          best = b;
          bestHeld = h;
        }
      }
      lastChars = m?.chars ?? 0;
      lastReason = 'smallest-tree';
      return [best];
    },
    onDispatch(req, backend) {
      routing.dispatched(req, backend.name);
    },
    onBackendRemoved(name) {
      trie.removeBackend(name);
    },
  };
}
