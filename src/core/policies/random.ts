import type { Policy, PolicyContext } from '../types.js';

/** Uniform choice among candidates, from the seeded source the host provides. */
export function random(ctx: PolicyContext): Policy {
  return {
    name: 'random',
    pick(_req, candidates) {
      return candidates[Math.floor(ctx.random() * candidates.length)];
    },
  };
}
