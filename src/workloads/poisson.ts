/**
 * Poisson arrivals: exponential gaps with mean 1/rate (open loop). The performance-aware router §5 sends 2000 requests
 * at an average of 20 per second this way.
 */
import { z } from 'zod';
import { createRng, deriveSeed } from '../core/rng.js';
import {
  arrivalBounds,
  hasBound,
  NO_BOUND,
  openLoop,
  parseParams,
  requestShape,
  ShapedRequests,
} from './common.js';
import type { ClientDriver, ScheduledRequest } from './types.js';

export const poissonParamsSchema = z
  .strictObject({
    /** Mean requests per second. */
    rate: z.number().finite().positive(),
    ...arrivalBounds,
    ...requestShape,
  })
  .refine(hasBound, NO_BOUND);
export type PoissonParams = z.input<typeof poissonParamsSchema>;

/** Send times of a Poisson stream of `rate` within [startS, durationS), at most `count`. */
export function poissonTimes(
  rng: () => number,
  rate: number,
  startS: number,
  durationS = Infinity,
  count = Infinity,
): number[] {
  const out: number[] = [];
  let t = startS;
  while (out.length < count) {
    t += -Math.log(1 - rng()) / rate;
    if (t >= durationS) break;
    out.push(t);
  }
  return out;
}

export function poissonWorkload(params: PoissonParams, seed: number): ClientDriver {
  const p = parseParams(poissonParamsSchema, params);
  return openLoop(() => {
    const times = poissonTimes(
      createRng(deriveSeed(seed, 'arrivals')),
      p.rate,
      p.startS,
      p.durationS,
      p.count,
    );
    const shape = new ShapedRequests(p, seed, times.length);
    return times.map((at, i): ScheduledRequest => ({ at, request: shape.make(i) }));
  });
}
