import { splitWall } from '../../../estimators/wall-split.js';
import type { BackendView, CompletionReport } from '../../../types.js';
import type { BackendState, Flight } from './backend-state.js';
import type { CachedPrefix } from './cached-prefix.js';
import type { Rates } from './rates.js';
import { slotsOf, slotsOfLearned } from './slots.js';

/** What learnRates reads besides the backend: the priors, the prefix credit, the default slot count. */
export interface LearnRatesContext {
  readonly rates: Rates;
  readonly prefix: CachedPrefix;
  readonly defaultSlots: number;
}

/**
 * Fits a backend's rates and slot count from one answered request (in flight there as `f`, its
 * area brought up to `now`): its prefill against the tokens the engine had to prefill (the prefix
 * credit's share removed), its decode step against the batch it ran in, and whether it queued
 * inside the engine. Engine durations (Ollama prompt_eval / eval) are exact; wall-clock answers
 * are split at the first byte, or, when whole, in the ratio whole answers of varied sizes show.
 */
export function learnRates(
  ctx: LearnRatesContext,
  b: BackendState,
  view: BackendView,
  f: Flight,
  r: CompletionReport,
  now: number,
): void {
  const { rates } = ctx;
  const outTokens = r.completionTokens;
  const wallS = (r.finishedAt - r.dispatchedAt) / 1000;
  // The batch it ran in: the backend's mean in-flight count over its life (itself included),
  // at most what the engine runs at once (requests queued behind a serial engine do not slow it).
  const lifeMs = now - f.dispatchedAt;
  const slots = slotsOf(b, view, ctx.defaultSlots);
  const batch = Math.min(slots, lifeMs > 0 ? (b.area - f.area0) / lifeMs : f.ahead + 1);
  const reported = reportedPrompt(r, f);
  // The engine prefilled only what it had not cached: fitted against the tokens the credit left.
  const tokens =
    f.cachedTokens === 0 ? reported : ctx.prefix.creditedPrefill(reported, creditedIn(f, reported));
  if (r.promptEvalMs !== undefined && r.evalMs !== undefined) {
    // Engine-measured: exact rates, and whether the request queued inside the engine.
    b.prefill.update(tokens, r.promptEvalMs / 1000);
    if (outTokens !== undefined && outTokens > 0)
      b.decode.update(batch, r.evalMs / 1000 / outTokens, Math.min(outTokens, 512));
    const engineS = (r.promptEvalMs + r.evalMs) / 1000;
    // Relative threshold: the gap also holds network and proxy time (ms), runs may be
    // time-scaled, and a batching engine admits a request only at its next step.
    const step = rates.decodeS(b, batch);
    const queued = wallS - engineS > 0.002 + 0.02 * wallS + 1.5 * step;
    if (!queued) {
      b.slots = Math.max(b.slots, f.ahead + 1);
      // It ran beside more than the engine was thought to admit: the limit seen was transient.
      if (b.slots > b.queuedAt) b.queuedAt = Infinity;
    } else if (f.ahead >= b.slots) {
      b.queuedAt = Math.min(b.queuedAt, f.ahead);
    }
  } else if (f.ahead < slotsOfLearned(b, ctx.defaultSlots)) {
    // Wall-clock only, and the request should not have queued: split it at the first byte.
    const first = r.firstByteAt;
    if (r.firstByteIsWholeAnswer === true) {
      // Non-streamed: the first byte is the whole answer. Split its time in the ratio whole
      // answers of varied sizes show, else by the current model (else the priors' ratio).
      b.wall.update(tokens, outTokens ?? 0, wallS);
      const fitted = b.wall.rates();
      const pre = b.prefill.at(tokens);
      const s = splitWall(
        wallS,
        tokens,
        outTokens ?? 0,
        fitted?.prefillSPerToken ?? (pre !== undefined && tokens > 0 ? pre / tokens : rates.priorPrefillS),
        fitted?.decodeSPerToken ?? b.decode.at(batch) ?? rates.priorDecodeS,
      );
      if (s !== undefined) {
        if (tokens > 0) b.prefill.update(tokens, s.prefillS);
        if (outTokens !== undefined && outTokens > 0)
          b.decode.update(batch, s.decodeSPerToken, Math.min(outTokens, 512));
      }
    } else if (first !== undefined && outTokens !== undefined && outTokens > 1 && first < r.finishedAt) {
      b.prefill.update(tokens, (first - r.dispatchedAt) / 1000);
      b.decode.update(batch, (r.finishedAt - first) / 1000 / (outTokens - 1), Math.min(outTokens, 512));
    } else if (outTokens !== undefined && outTokens > 0) {
      const pre = b.prefill.at(tokens) ?? 0;
      b.decode.update(batch, Math.max(0, wallS - pre) / outTokens, Math.min(outTokens, 512));
    }
  }
}

/** The answer's prompt tokens as the engine counted them (the router's estimate when it did not say). */
export function reportedPrompt(r: CompletionReport, f: Flight): number {
  return r.promptTokens !== undefined && r.promptTokens > 0 ? r.promptTokens : f.promptTokens;
}

/** The flight's credited prefix in the engine's tokens (`reported`: its prompt as the engine counted it). */
export function creditedIn(f: Flight, reported: number): number {
  return f.cachedTokens * (reported / f.promptTokens);
}
