/**
 * On/off bursts: a base rate, and every `periodS` seconds a burst of `burstDurationS` at
 * `burstRate` (open loop). Within each segment arrivals are Poisson (default) or evenly spaced;
 * Poisson restarts exactly at segment edges because it is memoryless.
 *
 *   rate ▲        ┌──┐        ┌──┐
 *        │ base ──┘  └────────┘  └──   firstBurstS, then one burst every periodS
 */
import { z } from 'zod';
import { createRng, deriveSeed } from '../core/rng.js';
import {
  arrivalBounds,
  hasBound,
  NO_BOUND,
  openLoop,
  parseParams,
  positiveSeconds,
  requestShape,
  seconds,
  ShapedRequests,
} from './common.js';
import { constantTimes } from './constant.js';
import { poissonTimes } from './poisson.js';
import type { ClientDriver, ScheduledRequest } from './types.js';

export const burstsParamsSchema = z
  .strictObject({
    /** Requests per second between bursts (0 = silence). */
    baseRate: z.number().finite().nonnegative().default(0),
    /** Requests per second during a burst. */
    burstRate: z.number().finite().positive(),
    burstDurationS: positiveSeconds,
    /** Time from one burst's start to the next's. */
    periodS: positiveSeconds,
    /** Start of the first burst, seconds after startS. */
    firstBurstS: seconds.default(0),
    /** Arrival process within a segment. */
    process: z.enum(['poisson', 'constant']).default('poisson'),
    ...arrivalBounds,
    ...requestShape,
  })
  .refine(hasBound, NO_BOUND)
  .refine((p) => p.burstDurationS <= p.periodS, { message: 'must be <= periodS', path: ['burstDurationS'] });
export type BurstsParams = z.input<typeof burstsParamsSchema>;

/** Send times of the on/off stream. */
export function burstTimes(p: z.output<typeof burstsParamsSchema>, rng: () => number): number[] {
  const end = p.durationS ?? Infinity;
  const count = p.count ?? Infinity;
  const out: number[] = [];
  const segment = (from: number, to: number, rate: number): void => {
    if (rate <= 0 || to <= from || out.length >= count) return;
    const left = count - out.length;
    const ts =
      p.process === 'poisson' ? poissonTimes(rng, rate, from, to, left) : constantTimes(rate, from, to, left);
    for (const t of ts) out.push(t);
  };
  let t = p.startS;
  let burst = p.startS + p.firstBurstS;
  while (t < end && out.length < count) {
    segment(t, Math.min(burst, end), p.baseRate);
    const burstEnd = Math.min(burst + p.burstDurationS, end);
    segment(Math.max(burst, t), burstEnd, p.burstRate);
    t = burstEnd;
    burst += p.periodS;
  }
  return out;
}

export function burstsWorkload(params: BurstsParams, seed: number): ClientDriver {
  const p = parseParams(burstsParamsSchema, params);
  return openLoop(() => {
    const times = burstTimes(p, createRng(deriveSeed(seed, 'arrivals')));
    const shape = new ShapedRequests(p, seed, times.length);
    return times.map((at, i): ScheduledRequest => ({ at, request: shape.make(i) }));
  });
}
