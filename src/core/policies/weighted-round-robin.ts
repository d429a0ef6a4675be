import type { BackendView, Policy } from '../types.js';

/**
 * Smooth weighted round-robin (nginx): each pick adds every candidate's weight to its running
 * score, takes the highest, and subtracts the total from it. Spreads a 5:1:1 ratio as
 * a,a,b,a,c,a,a rather than a burst of five.
 */
export function weightedRoundRobin(): Policy {
  const current = new Map<string, number>();
  return {
    name: 'weighted-round-robin',
    pick(_req, candidates) {
      let total = 0;
      let best: BackendView | undefined;
      let bestScore = -Infinity;
      for (const b of candidates) {
        const w = b.weight > 0 ? b.weight : 0;
        total += w;
        const score = (current.get(b.name) ?? 0) + w;
        current.set(b.name, score);
        if (score > bestScore) {
          bestScore = score;
          best = b;
        }
      }
      if (best === undefined) return undefined;
      current.set(best.name, bestScore - total);
      return best;
    },
    onBackendRemoved(name) {
      current.delete(name);
    },
  };
}
