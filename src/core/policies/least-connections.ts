import type { Policy } from '../types.js';
import { nextInRotation } from './rotation.js';

/** Fewest requests in flight; ties broken round-robin so equal backends share the load. */
export function leastConnections(): Policy {
  let next = 0;
  return {
    name: 'least-connections',
    pick(_req, candidates) {
      let min = Infinity;
      for (const b of candidates) if (b.inFlight < min) min = b.inFlight;
      const chosen = nextInRotation(candidates, next, (b) => b.inFlight === min);
      if (chosen) next = chosen.index + 1;
      return chosen;
    },
  };
}
