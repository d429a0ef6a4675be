import { z } from 'zod';
import { HOLD } from '../../types.js';
import type { Policy, PolicyContext } from '../../types.js';
import { parseParams } from '../framework/params.js';

/**
 * Everything to one named backend (held in the router queue while it is at its cap): the
 * "single host" baseline of OllamaRouter, and a way to pin traffic while debugging a node.
 */
const Params = z.strictObject({ backend: z.string().min(1) });

export function pinned(ctx: PolicyContext): Policy {
  const { backend } = parseParams(Params, ctx.params, 'pinned');
  return {
    name: 'pinned',
    pick(_req, candidates) {
      return candidates.find((c) => c.name === backend) ?? HOLD.retry;
    },
  };
}
