import type { BackendView } from '../../types.js';

/**
 * Round-robin order over registration indexes: the first candidate at or after `cursor`, wrapping
 * to the lowest index. Candidates need not be contiguous (some backends are busy or ineligible).
 */
export function nextInRotation(
  candidates: readonly BackendView[],
  cursor: number,
  accept?: (b: BackendView) => boolean,
): BackendView | undefined {
  let best: BackendView | undefined;
  let wrap: BackendView | undefined;
  for (let i = 0; i < candidates.length; i++) {
    const b = candidates[i]!;
    // No default `() => true`: a default parameter is a new closure on every call.
    if (accept !== undefined && !accept(b)) continue;
    if (b.index >= cursor) {
      if (best === undefined || b.index < best.index) best = b;
    } else if (wrap === undefined || b.index < wrap.index) wrap = b;
  }
  return best ?? wrap;
}
