import type { BackendState, Cost } from './backend-state.js';
import type { WaitModel } from './wait-model.js';

/**
 * What one candidate costs a request — the one place where the backend's wait, this request's
 * uncached prefill there (prefix credit applied: CachedPrefix.creditedPrefill) and its load on
 * the others are priced together. The policy picks the lowest; the scorer scores the finish alone
 * (othersWeight 0).
 *
 *   cost = startWait + prefillS(uncachedTokens) + out × batch step   (its own finish)
 *        + othersWeight × delayToOthers(uncachedTokens, out)          (its marginal cost to the rest)
 */
export function candidateCost(
  wait: WaitModel,
  b: BackendState,
  c: Cost,
  slots: number,
  now: number,
  uncachedTokens: number,
  out: number,
  othersWeight: number,
): number {
  const finish = finishEstimate(wait, b, c, slots, now, uncachedTokens, out);
  if (!(othersWeight > 0)) return finish;
  return finish + othersWeight * wait.delayToOthers(b, c, slots, now, uncachedTokens, out);
}

/**
 * Seconds from `now` until the request would finish on b, costed at `c` (the estimator's costOf)
 * with `slots` (slotsOf): the wait before it starts, then its uncached prefill and `out` decode
 * steps in the batch it joins.
 */
export function finishEstimate(
  wait: WaitModel,
  b: BackendState,
  c: Cost,
  slots: number,
  now: number,
  uncachedTokens: number,
  out: number,
): number {
  const step = wait.batchStepS(b, c, slots);
  const service = wait.rates.prefillS(c, uncachedTokens) + out * step;
  return wait.startWait(b, c, slots, now, step) + service;
}
