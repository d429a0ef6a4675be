/**
 * The prompt cache of a llama.cpp server (EngineProfile.cacheMode 'slots'): each slot keeps the
 * tokens of the last sequence it ran — nothing else, and nothing shared between slots. A new
 * sequence takes the free slot whose kept blocks share the longest prefix with its prompt (the
 * least recently used one on a tie, so a prompt no slot shares overwrites the oldest), and reuses
 * that prefix. As bench/real-prefix/slots.ts's pickSlot, in blocks instead of tokens.
 */
import type { EngineCacheInfo } from '../core/types.js';
import type { BlockHash } from './tokens.js';
import type { EngineProfile } from './types.js';

/**
 * What an engine of `profile` says of its prompt cache when it is llama.cpp's (cacheMode 'slots',
 * with a cache at all): `slots` slots of n_ctx = kvCapacityTokens / slots tokens each — what the
 * live engine's /props serves and the simulator reports. Undefined otherwise (no /props).
 */
export function slotCacheInfo(
  profile: Pick<EngineProfile, 'cacheMode' | 'prefixCacheBlocks' | 'slots' | 'kvCapacityTokens'>,
): (EngineCacheInfo & { readonly slots: number; readonly slotTokens: number }) | undefined {
  if (profile.cacheMode !== 'slots' || !(profile.prefixCacheBlocks > 0)) return undefined;
  const slotTokens = Math.floor(profile.kvCapacityTokens / profile.slots);
  return { tokens: profile.slots * slotTokens, slots: profile.slots, slotTokens };
}

const NONE: readonly BlockHash[] = Object.freeze([]);

export class SlotCache {
  /** Per slot: the block hashes its KV holds (the last prompt, then its answer once finished). */
  private readonly kept: (readonly BlockHash[])[];
  private readonly busy: Uint8Array;
  /** Per slot: when it was last released (a counter; lower is older). */
  private readonly lastUsed: Float64Array;
  private clock = 0;
  /** take()'s match: blocks of the prompt its slot already held. */
  matched = 0;

  constructor(readonly slots: number) {
    this.kept = Array.from({ length: slots }, () => NONE);
    this.busy = new Uint8Array(slots);
    this.lastUsed = new Float64Array(slots);
  }

  /**
   * Run `hashes` in a free slot: returns the slot (-1 when every slot is busy) and sets `matched`
   * to the blocks of its prompt that slot already held. The slot now holds this prompt.
   */
  take(hashes: readonly BlockHash[]): number {
    let best = -1;
    let bestMatch = -1;
    for (let i = 0; i < this.slots; i++) {
      if (this.busy[i] === 1) continue;
      const m = commonPrefixLength(this.kept[i]!, hashes);
      if (m > bestMatch || (m === bestMatch && this.lastUsed[i]! < this.lastUsed[best]!)) {
        best = i;
        bestMatch = m;
      }
    }
    if (best < 0) return -1;
    this.busy[best] = 1;
    this.kept[best] = hashes;
    this.matched = bestMatch;
    return best;
  }

  /** The sequence in `slot` ended; a finished one passes `context` (prompt + answer), which the slot keeps. */
  release(slot: number, context?: readonly BlockHash[]): void {
    if (slot < 0 || this.busy[slot] !== 1) return;
    this.busy[slot] = 0;
    this.lastUsed[slot] = ++this.clock;
    if (context !== undefined) this.kept[slot] = context;
  }

  /** Blocks the slots hold, in all. */
  get blocks(): number {
    let n = 0;
    for (const k of this.kept) n += k.length;
    return n;
  }
}

/** The length of the common prefix of two lists (block hash chains here, token ids in bench/real-prefix). */
export function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
