import type { BackendView, Policy } from '../types.js';

/** Fewest requests in flight; ties broken round-robin so equal backends share the load. */
export function leastConnections(): Policy {
  let next = 0;
  return {
    name: 'least-connections',
    pick(_req, candidates) {
      let min = Infinity;
      for (const b of candidates) if (b.inFlight < min) min = b.inFlight;
      let best: BackendView | undefined;
      let wrap: BackendView | undefined;
      for (const b of candidates) {
        if (b.inFlight !== min) continue;
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
