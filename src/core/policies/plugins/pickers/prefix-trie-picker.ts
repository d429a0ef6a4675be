import { HOLD } from '../../../types.js';
import { z } from 'zod';
import type { PrefixTrie } from '../../../prefix/prefix-trie.js';
import type { BackendView } from '../../../types.js';
import { leastOutstanding } from '../../builtin/least-outstanding.js';
import type { Picker, PluginContext } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';
import { trieParams, TrieRouting } from '../../builtin/trie-routing.js';

const Params = z.strictObject({
  ...trieParams,
  /**
   * Hot-spot avoidance: a match shorter than this share of the (indexed) prompt routes by load
   * instead — a shared system prompt alone must not pin all traffic to one backend.
   */
  minMatchRatio: z.number().min(0).max(1).default(0.5),
  /** …or shorter than this many characters. */
  minMatchChars: z.number().int().min(0).default(0),
  /**
   * The matched backend is overloaded, and load decides instead, when its outstanding requests
   * exceed both the least loaded candidate's by more than `overloadMargin` and `overloadFactor`
   * times the candidates' mean (both, as SGLang's cache-aware router does, so small counts do not
   * flip it).
   */
  overloadMargin: z.number().min(0).default(4),
  overloadFactor: z.number().min(1).default(1.5),
  /**
   * With selective pushing, a request whose longest match is on a backend that is not available
   * now (filtered out: busy) may wait up to this long (ms since it reached the router) for it
   * instead of going to an available backend with a shorter match; later requests pass it. 0: never.
   */
  waitForMatchMs: z.number().min(0).default(0),
});

export type PrefixTriePickerParams = z.input<typeof Params>;

/** What the prefix-trie picker decided for the last request it saw (tests, bench, explain). */
export interface PrefixTrieDecision {
  readonly matchedChars: number;
  /**
   * 'prefix': longest match; 'short-match' / 'overloaded': load decided (hot-spot avoidance);
   * 'wait-for-match': held for a busy backend with a longer match.
   */
  readonly reason: 'prefix' | 'short-match' | 'overloaded' | 'wait-for-match';
}

/**
 * SkyLB's prefix-tree routing (SkyLB §3.2): the candidate holding the longest prefix of the
 * prompt in an approximate trie of what this router pushed where; among several with that match,
 * the least loaded. Candidates are the available backends after the
 * profile's filters (SP-O / SP-P), so the walk stops as soon as no available backend remains down
 * the path. A short match or an overloaded match routes by least outstanding requests instead.
 */
export function prefixTriePicker(ctx: PluginContext): Picker & {
  readonly trie: PrefixTrie;
  lastDecision(): PrefixTrieDecision | undefined;
} {
  const p = parseParams(Params, ctx.params, ctx.name);
  const routing = new TrieRouting(p);
  const { trie, marks } = routing;
  let cursor = 0;
  /** The request this picker picked last: a push of any other is another router's (shared state). */
  let pickedId: string | undefined;
  // The last decision, kept as fields (an object per pick would be garbage for every request).
  let lastChars = -1;
  let lastReason: PrefixTrieDecision['reason'] = 'prefix';

  const byLoad = (
    candidates: readonly BackendView[],
    matchedChars: number,
    reason: PrefixTrieDecision['reason'],
  ) => {
    const b = leastOutstanding(candidates, cursor)!;
    cursor = b.index + 1;
    lastChars = matchedChars;
    lastReason = reason;
    return [b];
  };
  /** Too short a match to follow, for a prompt with `indexed` characters indexed. */
  const short = (chars: number, indexed: number): boolean =>
    chars === 0 || chars < p.minMatchChars || chars < p.minMatchRatio * indexed;

  return {
    kind: 'picker',
    type: 'prefix-trie-picker',
    name: ctx.name,
    // It reads the candidates' in-flight counts and its trie, never engine metrics; it holds only
    // to wait for a match (waitForMatchMs), so without that a blind profile of it needs no probes.
    traits: { holds: p.waitForMatchMs !== 0, readsMetrics: false },
    trie,
    lastDecision: () => (lastChars < 0 ? undefined : { matchedChars: lastChars, reason: lastReason }),
    pick(req, candidates, _scores, now) {
      const n = candidates.length;
      if (n === 0) return [];
      pickedId = req.id;
      const keys = routing.keysOf(req);
      if (keys.length === 0) return byLoad(candidates, 0, 'short-match');
      marks.mark(candidates);
      const m = trie.match(keys, marks.isAvailable);
      const indexed = Math.min(req.promptText.length, p.maxPrefixChars);
      if (p.waitForMatchMs > 0 && now - req.arrivedAt < p.waitForMatchMs) {
        // A longer match on a backend the filters left out: hold for it (bounded), if worth it.
        const all = trie.match(keys, () => true);
        if (all.chars > m.chars && !short(all.chars, indexed)) {
          lastChars = m.chars;
          lastReason = 'wait-for-match';
          return HOLD.retry;
        }
      }
      if (short(m.chars, indexed)) return byLoad(candidates, m.chars, 'short-match');
      // Longest match held by several: the least loaded (ties: the first that was sent it).
      let chosen = candidates[marks.position(m.owners[0]!)]!;
      for (let j = 1; j < m.owners.length; j++) {
        const b = candidates[marks.position(m.owners[j]!)]!;
        if (b.inFlight < chosen.inFlight) chosen = b;
      }
      // Overloaded needs more than overloadMargin outstanding (the least loaded has ≥ 0): only then
      // is the candidates' load read.
      const out = chosen.inFlight;
      if (out > p.overloadMargin) {
        let sum = 0;
        let min = Infinity;
        for (let i = 0; i < n; i++) {
          const load = candidates[i]!.inFlight;
          sum += load;
          if (load < min) min = load;
        }
        if (out > min + p.overloadMargin && out > (p.overloadFactor * sum) / n)
          return byLoad(candidates, m.chars, 'overloaded');
      }
      lastChars = m.chars;
      lastReason = 'prefix';
      return [chosen];
    },
    onDispatch(req, backend) {
      // Another router's push (issue #31: routers that share their pushes) that this trie would
      // have routed by load moves the tie cursor as this router's own would: routers that see the
      // same pushes in the same order then break load ties alike, as one router does. (Overload
      // is not judged here: that needs the candidates' counts at the other router's pick.)
      if (req.id !== pickedId) {
        const keys = routing.keysOf(req);
        const indexed = Math.min(req.promptText.length, p.maxPrefixChars);
        if (keys.length === 0 || short(trie.match(keys, () => true).chars, indexed))
          cursor = backend.index + 1;
      }
      routing.dispatched(req, backend.name);
    },
    onBackendRemoved(name) {
      trie.removeBackend(name);
    },
  };
}
