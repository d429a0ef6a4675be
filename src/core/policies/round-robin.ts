import type { BackendView, Policy } from '../types.js';

/** Rotates over backends in registration order, skipping those not among the candidates. */
export function roundRobin(): Policy {
  let next = 0;
  return {
    name: 'round-robin',
    pick(_req, candidates) {
      // Choose the first candidate at or after the cursor (by registration index), wrapping.
      let best: BackendView | undefined;
      let wrap: BackendView | undefined;
      for (const b of candidates) {
        if (b.index >= next) {
          if (best === undefined || b.index < best.index) best = b;
        } else if (wrap === undefined || b.index < wrap.index) wrap = b;
      }
      const chosen = best ?? wrap;
      if (chosen) next = chosen.index + 1;
      return chosen;
    },
  };
}
