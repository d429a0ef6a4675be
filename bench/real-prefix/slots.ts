/**
 * Slot choice of the real-prefix engine, as llama.cpp's server makes it: a request takes the free
 * slot whose cached tokens share the longest prefix with its prompt, the least recently used one
 * when none shares any (or on a tie), and reuses that prefix — keeping at least one prompt token to
 * evaluate, since the first output token needs the logits of the prompt's last one.
 */
import { commonPrefixLength } from '../../src/engine/slot-cache.js';

/** What a slot holds, as the chooser sees it. */
export interface SlotView {
  readonly busy: boolean;
  /** Tokens in the slot's KV cache, in order. */
  readonly tokens: readonly number[];
  /** When it last finished a request (any increasing counter). */
  readonly lastUsed: number;
}

/** Cached tokens a prompt can keep from a slot: the common prefix, less one when it is the whole prompt. */
export function reusableTokens(cached: readonly number[], prompt: readonly number[]): number {
  return Math.min(commonPrefixLength(cached, prompt), Math.max(0, prompt.length - 1));
}

/** The free slot to run `prompt` in (index into `slots`), or -1 when all are busy. */
export function pickSlot(slots: readonly SlotView[], prompt: readonly number[]): number {
  let best = -1;
  let bestReuse = -1;
  for (let i = 0; i < slots.length; i++) {
    const s = slots[i]!;
    if (s.busy) continue;
    const reuse = reusableTokens(s.tokens, prompt);
    if (reuse > bestReuse || (reuse === bestReuse && s.lastUsed < slots[best]!.lastUsed)) {
      best = i;
      bestReuse = reuse;
    }
  }
  return best;
}
