import type { BackendState, Cost } from './backend-state.js';

/**
 * A backend's fitted rates read as seconds, with the policy's priors where a fit has no samples
 * yet (priorPrefillS per prompt token, priorDecodeS per output token).
 */
export class Rates {
  constructor(
    readonly priorPrefillS: number,
    readonly priorDecodeS: number,
  ) {}

  /** Seconds to prefill `promptTokens` at cost `c`. */
  prefillS(c: Cost, promptTokens: number): number {
    return c.prefill.at(promptTokens) ?? promptTokens * this.priorPrefillS;
  }

  /** Seconds per prompt token at cost `c`: its prefill fit's slope, or the prior. */
  prefillSlopeS(c: Cost): number {
    return c.prefill.slope ?? this.priorPrefillS;
  }

  /** Seconds per output token at cost `c` in a batch of `batch` sequences. */
  decodeS(c: Cost, batch: number): number {
    return c.decode.at(batch) ?? this.priorDecodeS;
  }

  /** The measured backend of `backends` that would serve a lone request of this shape fastest. */
  bestCost(backends: readonly BackendState[], promptTokens: number, out: number): Cost | undefined {
    let best: Cost | undefined;
    let bestT = Infinity;
    for (let i = 0; i < backends.length; i++) {
      const b = backends[i]!;
      if (b.lastSampleAt === undefined) continue;
      const t = this.prefillS(b, promptTokens) + out * this.decodeS(b, 1);
      if (t < bestT) {
        bestT = t;
        best = b;
      }
    }
    return best;
  }
}
