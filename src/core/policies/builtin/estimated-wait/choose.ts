import type { BackendView } from '../../../types.js';
import type { WaitEstimator } from './estimator.js';
import type { EstimatedWaitParams } from './params.js';

/**
 * The estimated-wait pick's last step (policy.ts; moved out of estimatedWait for issue #33): which
 * costed candidate it pushes to — the lowest cost among those it may push to now, or among the
 * near-best the one the tie-break puts first.
 */

/**
 * Whether candidate i may take the request now: it has room (late binding, `open`), or it holds
 * more than `floor` tokens of the prompt (queueForCache, cacheFloor) — then its cost, which counts
 * the wait inside it, decides.
 */
function pushable(
  est: WaitEstimator,
  p: EstimatedWaitParams,
  open: Uint8Array,
  i: number,
  floor: number,
): boolean {
  return open[i] === 1 || (p.queueForCache && est.candCached[i]! > floor);
}

/**
 * The prompt tokens a full candidate must hold to be queued into (queueForCache): more than none,
 * and at least queueForCacheShare of the most any of the `n` holds — an engine holding only the
 * prompt's shared system prompt is no reason to queue there instead of at the prompt's holder.
 */
function cacheFloor(est: WaitEstimator, p: EstimatedWaitParams, n: number): number {
  // Only queueForCache reads it: no pass over the candidates when it is off.
  if (!p.queueForCache || !(p.queueForCacheShare > 0)) return 0;
  let most = 0;
  for (let i = 0; i < n; i++) if (est.candCached[i]! > most) most = est.candCached[i]!;
  return Math.max(0, p.queueForCacheShare * most - 1e-9);
}

/** Standard error of candidate i's service estimate for this request (its fits' uncertainty). */
function serviceError(est: WaitEstimator, i: number, promptTokens: number, out: number): number {
  const c = est.candCost[i]!;
  const batch = Math.min(est.candState[i]!.flights.length + 1, est.candSlots[i]!);
  return Math.hypot(c.prefill.stderr(promptTokens), out * c.decode.stderr(batch));
}

/**
 * Whether candidate i goes before candidate j among near-best estimates: more of the prompt cached
 * (tieByCache), then fewer in flight, then unmeasured, then round-robin order from `cursor`.
 */
function tieBreak(
  est: WaitEstimator,
  p: EstimatedWaitParams,
  candidates: readonly BackendView[],
  i: number,
  j: number,
  cursor: number,
): boolean {
  if (p.tieByCache) {
    // Within a token: the same shared prefix (a system prompt every engine holds) is no preference.
    const d = est.candCached[i]! - est.candCached[j]!;
    if (d > 1 || d < -1) return d > 0;
  }
  const c = candidates[i]!;
  const chosen = candidates[j]!;
  if (c.inFlight !== chosen.inFlight) return c.inFlight < chosen.inFlight;
  const cm = est.candState[i]!.lastSampleAt !== undefined;
  const xm = est.candState[j]!.lastSampleAt !== undefined;
  if (cm !== xm) return !cm;
  return rrBefore(c.index, chosen.index, cursor);
}

/**
 * The candidate to push to (pushable), of the `n` costed in `scratch`: the lowest cost, or among the
 * near-best — within tieTolerance, or within tieStdErrors of the two fits' combined standard
 * error — the one tieBreak puts first. -1: none open.
 */
export function chooseCandidate(
  est: WaitEstimator,
  p: EstimatedWaitParams,
  candidates: readonly BackendView[],
  n: number,
  scratch: Float64Array,
  open: Uint8Array,
  cursor: number,
  promptTokens: number,
  predicted: number,
): number {
  const floor = cacheFloor(est, p, n);
  let min = Infinity;
  let at = -1;
  for (let i = 0; i < n; i++) {
    if (pushable(est, p, open, i, floor) && scratch[i]! < min) {
      min = scratch[i]!;
      at = i;
    }
  }
  if (at < 0) return -1; // unreachable: holdForLater holds when none is open
  const errors = p.tieStdErrors > 0;
  const minErr = errors ? serviceError(est, at, promptTokens, predicted) : 0;
  let chosen = -1;
  for (let i = 0; i < n; i++) {
    if (!pushable(est, p, open, i, floor)) continue;
    const t = scratch[i]!;
    const near =
      t <= min * (1 + p.tieTolerance) + 1e-12 ||
      t - min <=
        p.tieStdErrors * Math.hypot(errors ? serviceError(est, i, promptTokens, predicted) : 0, minErr);
    if (!near) continue;
    if (chosen < 0 || tieBreak(est, p, candidates, i, chosen, cursor)) chosen = i;
  }
  // Every estimate is finite and ≥ 0 (fits are clamped), so one is always within the limit.
  return chosen < 0 ? at : chosen;
}

/** Whether index a comes before index b in round-robin order starting at `cursor`. */
export function rrBefore(a: number, b: number, cursor: number): boolean {
  const da = a >= cursor ? a - cursor : a - cursor + 1e9;
  const db = b >= cursor ? b - cursor : b - cursor + 1e9;
  return da < db;
}
