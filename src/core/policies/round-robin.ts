import type { Policy } from '../types.js';
import { nextInRotation } from './rotation.js';

/** Rotates over backends in registration order, skipping those not among the candidates. */
export function roundRobin(): Policy {
  let next = 0;
  return {
    name: 'round-robin',
    pick(_req, candidates) {
      const chosen = nextInRotation(candidates, next);
      if (chosen) next = chosen.index + 1;
      return chosen;
    },
  };
}
