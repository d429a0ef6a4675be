import type { BackendView } from '../../types.js';

/**
 * The candidate with the fewest requests in flight from this router; ties go round-robin over
 * registration indexes from `cursor` (the caller advances it past the chosen one), so equal
 * backends share load evenly and deterministically. Undefined for no candidates.
 */
export function leastOutstanding(
  candidates: readonly BackendView[],
  cursor: number,
): BackendView | undefined {
  let min = Infinity;
  for (let i = 0; i < candidates.length; i++)
    if (candidates[i]!.inFlight < min) min = candidates[i]!.inFlight;
  let best: BackendView | undefined;
  let wrap: BackendView | undefined;
  for (let i = 0; i < candidates.length; i++) {
    const b = candidates[i]!;
    if (b.inFlight !== min) continue;
    if (b.index >= cursor) {
      if (best === undefined || b.index < best.index) best = b;
    } else if (wrap === undefined || b.index < wrap.index) wrap = b;
  }
  return best ?? wrap;
}
