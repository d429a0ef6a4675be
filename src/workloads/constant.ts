/**
 * Constant arrival rate (k6's `constant-arrival-rate` executor): request i is sent at
 * startS + i / rate, whatever happened to the earlier ones (open loop). OllamaRouter §5: one request
 * every 40 s (rate 0.025) for 40 minutes gives requests at 0, 40, …, 2360 s — 60 of them.
 */
import { z } from 'zod';
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

export const constantParamsSchema = z
  .strictObject({
    /** Requests per second. */
    rate: z.number().finite().positive(),
    ...arrivalBounds,
    ...requestShape,
  })
  .refine(hasBound, NO_BOUND);
export type ConstantParams = z.input<typeof constantParamsSchema>;

/** Send times of a constant-rate stream within the bounds. */
export function constantTimes(
  rate: number,
  startS: number,
  durationS = Infinity,
  count = Infinity,
): number[] {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    // Multiply rather than accumulate so long runs do not drift (k6 schedules the same way).
    const t = startS + i / rate;
    if (t >= durationS) break;
    out.push(t);
  }
  return out;
}

export function constantWorkload(params: ConstantParams, seed: number): ClientDriver {
  const p = parseParams(constantParamsSchema, params);
  return openLoop(() => {
    const times = constantTimes(p.rate, p.startS, p.durationS, p.count);
    const shape = new ShapedRequests(p, seed, times.length);
    return times.map((at, i): ScheduledRequest => ({ at, request: shape.make(i) }));
  });
}
