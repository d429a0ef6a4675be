import type { BackendState, Cost } from './backend-state.js';
import type { WaitModel } from './wait-model.js';
import type { BackendView, RequestInfo } from '../../../types.js';
import { LORA_FREE_SLOT, LORA_LOADED, type LoraSlots } from '../../shared/lora-slots.js';

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

/**
 * One cost for locality and load (issue #30): adds to each of the `n` candidates' costs in `out`
 * `missWeight` times the prefill seconds of the prompt tokens it would prefill beyond the
 * candidate that holds most of the prompt (`uncached`: per candidate, the tokens it would prefill;
 * `costs`: the fits each is priced at). The candidate holding the most pays nothing extra; where
 * no candidate holds any of it, or all hold the same, nothing changes.
 */
export function missPenalty(
  wait: WaitModel,
  costs: readonly Cost[],
  uncached: Float64Array,
  n: number,
  missWeight: number,
  out: Float64Array,
): void {
  if (!(missWeight > 0)) return;
  let least = Infinity;
  for (let i = 0; i < n; i++) if (uncached[i]! < least) least = uncached[i]!;
  for (let i = 0; i < n; i++) {
    const extra = uncached[i]! - least;
    if (extra > 0) out[i]! += missWeight * wait.rates.prefillSlopeS(costs[i]!) * extra;
  }
}

/**
 * Slot engines (issue #30): adds to each of the `n` candidates' costs in `out` `weight` times the
 * prefill of the prompt its slots would drop for this request (`evictedTokens`, per candidate: a
 * prompt no other slot holds — slot-mirror.ts evictedChars), priced at `costs`. Without it the
 * first reads of six documents went to the engine learned fastest and evicted each other there.
 */
export function evictPenalty(
  wait: WaitModel,
  costs: readonly Cost[],
  evictedTokens: Float64Array,
  n: number,
  weight: number,
  out: Float64Array,
): void {
  if (!(weight > 0)) return;
  for (let i = 0; i < n; i++) {
    const t = evictedTokens[i]!;
    if (t > 0) out[i]! += weight * wait.rates.prefillSlopeS(costs[i]!) * t;
  }
}

/** Requests queued past their engine's slots over the `n` candidates (`states`' flights beyond `slots`). */
export function queuedPastSlots(states: readonly BackendState[], slots: Float64Array, n: number): number {
  let queued = 0;
  for (let i = 0; i < n; i++) {
    const s = slots[i]!;
    if (Number.isFinite(s)) queued += Math.max(0, states[i]!.flights.length - s);
  }
  return queued;
}

/**
 * TTFT (issue #30, prefix-agents-8 ×1): adds to each of the `n` candidates' costs in `out`
 * `ttftWeight` times the request's time to its first token there — the prefill it would wait
 * behind where it has room, then its own uncached prefill (`uncached`, priced at `costs`). A full
 * engine's slot wait is left out: priced there it took prefix-heavy traffic at ×2 off its holders.
 * The finish-time cost alone sends a long prompt off its holder for a second of decode saved in a
 * smaller batch, and its prefill there is the TTFT tail.
 */
export function ttftPenalty(
  wait: WaitModel,
  states: readonly BackendState[],
  costs: readonly Cost[],
  slots: Float64Array,
  uncached: Float64Array,
  now: number,
  n: number,
  ttftWeight: number,
  out: Float64Array,
): void {
  if (!(ttftWeight > 0)) return;
  for (let i = 0; i < n; i++) {
    const b = states[i]!;
    const c = costs[i]!;
    const s = slots[i]!;
    const ttft =
      b.flights.length < s
        ? timeToFirstToken(wait, b, c, s, now, uncached[i]!)
        : wait.rates.prefillS(c, uncached[i]!);
    out[i]! += ttftWeight * ttft;
  }
}

/**
 * Seconds until a request would get its first token on backend `b` (priced at `c`, `slots` slots):
 * the prefill it waits behind to start, then its own `uncached` prompt tokens' prefill.
 */
export function timeToFirstToken(
  wait: WaitModel,
  b: BackendState,
  c: Cost,
  slots: number,
  now: number,
  uncached: number,
): number {
  return wait.startWait(b, c, slots, now, wait.batchStepS(b, c, slots)) + wait.rates.prefillS(c, uncached);
}

/**
 * The miss price near saturation (issue #30, the knee): `missWeight` plus `queueWeight` times the
 * requests queued past their engine's slots (`queued`: queuedPastSlots), averaged over the `n`
 * candidates. An engine's extra prefill delays whoever waits behind it,
 * and a fleet that queues everywhere sends that wait on to every request it holds: the deeper the
 * queues, the more a lost hit costs, and what spreads load at light load keeps locality at the knee.
 */
export function missPrice(queued: number, n: number, missWeight: number, queueWeight: number): number {
  if (!(queueWeight > 0) || n === 0) return missWeight;
  return missWeight + (queueWeight * queued) / n;
}

/**
 * LoRA (issue #35): adds to each of the `n` candidates' costs in `out` what the request's adapter
 * costs there: nothing where it is loaded; its load, `swapS`, where a slot is free (the engine
 * stalls that iteration for it); where every slot is in use, the load plus the wait for a slot to
 * free, priced as the request's own cost there (a slot frees when a request of another adapter
 * ends). Candidates that do not serve the model as an adapter are left as they are.
 */
export function loraPenalty(
  slots: LoraSlots,
  req: RequestInfo,
  candidates: readonly BackendView[],
  n: number,
  swapS: number,
  out: Float64Array,
): void {
  for (let i = 0; i < n; i++) {
    const b = candidates[i]!;
    if (b.adapters?.has(req.model) !== true) continue;
    const place = slots.place(req.model, b);
    if (place === LORA_LOADED) continue;
    out[i]! += place === LORA_FREE_SLOT ? swapS : swapS + out[i]!;
  }
}
