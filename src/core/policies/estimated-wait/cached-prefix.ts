import type { RequestInfo } from '../../types.js';
import { PrefixCredit } from '../prefix-credit.js';

/**
 * The estimated-wait policy's use of prefix credit (prefix-credit.ts): which share of a request's
 * prompt a backend likely holds in its prefix cache (what this router sent it), and so how many
 * prompt tokens it would prefill there. `share` (the policy's prefixCredit, 0–1) is the part of
 * the cached prefix not charged; at 0 nothing is recorded and every backend prefills the whole
 * prompt.
 */
export class CachedPrefix {
  private readonly credit: PrefixCredit | undefined;

  constructor(
    private readonly share: number,
    capacityChunks: number,
  ) {
    this.credit =
      share > 0 ? new PrefixCredit({ chunkChars: 64, capacityChunks, maxPrefixChars: 32_768 }) : undefined;
  }

  /** A request's prompt chunk keys for the credit (none: no credit, or no backend holds any of it). */
  keysOf(req: RequestInfo): Float64Array | undefined {
    return this.credit === undefined || req.promptText.length === 0
      ? undefined
      : this.credit.keysOf(req.id, req.promptText);
  }

  /** Prompt tokens of a request (its `keys`: keysOf) in the prefix `backend` likely holds cached. */
  cachedOf(req: RequestInfo, keys: Float64Array | undefined, backend: string, promptTokens: number): number {
    if (keys === undefined || keys.length === 0) return 0;
    const chars = this.credit!.cachedChars(backend, keys);
    return chars === 0 ? 0 : promptTokens * Math.min(1, chars / req.promptText.length);
  }

  /** Tokens to prefill when `cached` of `promptTokens` are likely cached: less the share credited. */
  creditedPrefill(promptTokens: number, cached: number): number {
    return cached === 0 ? promptTokens : Math.max(1, promptTokens - this.share * cached);
  }

  /** The request was pushed to `backend`: it now likely holds the prompt's prefix. */
  record(id: string, backend: string, promptText: string): void {
    this.credit?.record(id, backend, promptText);
  }

  removeBackend(name: string): void {
    this.credit?.removeBackend(name);
  }

  /** Chunks remembered for `backend` (undefined: credit off). */
  chunksOf(backend: string): number | undefined {
    return this.credit?.sizeOf(backend);
  }
}
