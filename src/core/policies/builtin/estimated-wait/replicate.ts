import type { WaitEstimator } from './estimator.js';
import type { EstimatedWaitParams } from './params.js';
import { timeToFirstToken } from './candidate-cost.js';

/**
 * Hot-prefix replication (issue #30, prefix-documents-8 ×2): `chosen` is a full engine that the
 * pick queues a request into for the prompt it holds (queueForCache). At the knee the miss price
 * keeps every re-read of a popular document on its one holder, and the queue inside that holder
 * becomes the TTFT tail (15–21 s estimated start wait against a 35–50k-token miss elsewhere). When
 * the holder's time to first token exceeds `replicateHot` times that of the cheapest engine with
 * room (its start wait plus the prompt's uncached prefill there), the request goes there instead:
 * that engine then holds the prompt too, and later reads split between two holders.
 * Returns the candidate to push to: `chosen`, or the engine with room.
 */
export function replicaFor(
  est: WaitEstimator,
  p: EstimatedWaitParams,
  open: Uint8Array,
  n: number,
  scratch: Float64Array,
  chosen: number,
  now: number,
): number {
  if (!(p.replicateHot > 0) || open[chosen] === 1) return chosen;
  // A hot prefix, not a saturated fleet: no other engine queues past its slots (there a miss's
  // prefill is work everyone queued waits behind, and copies spiral).
  for (let i = 0; i < n; i++)
    if (i !== chosen && est.candState[i]!.flights.length > est.candSlots[i]!) return chosen;
  let alt = -1;
  for (let i = 0; i < n; i++) if (open[i] === 1 && (alt < 0 || scratch[i]! < scratch[alt]!)) alt = i;
  if (alt < 0) return chosen;
  return ttftOn(est, chosen, now) > p.replicateHot * ttftOn(est, alt, now) ? alt : chosen;
}

/** Seconds until candidate i would give the request its first token (timeToFirstToken). */
function ttftOn(est: WaitEstimator, i: number, now: number): number {
  return timeToFirstToken(
    est.wait,
    est.candState[i]!,
    est.candCost[i]!,
    est.candSlots[i]!,
    now,
    est.uncached[i]!,
  );
}
