/**
 * Bursty arrivals shaped like production LLM traces (open loop): a renewal process whose gaps are
 * Gamma- or Weibull-distributed with a coefficient of variation `cv` (> 1: heavier clustering
 * than Poisson, whose gaps have cv 1), optionally modulated: every `modulation.windowS` seconds
 * the rate is redrawn as `rate · G`, G ~ Gamma(mean 1, cv `modulation.cv`) — a Gamma-modulated
 * Poisson process when `cv` is 1. Public traces of conversation and code services show both: short
 * clusters of requests and minutes-long swings of the rate.
 *
 * Pair with lognormal token counts (`promptTokens: { dist: lognormal, mean, sigma }`).
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
  ShapedRequests,
} from './common.js';
import type { ClientDriver, ScheduledRequest } from './types.js';

const cvSchema = z.number().finite().positive().max(10);

export const burstyParamsSchema = z
  .strictObject({
    /** Mean requests per second over the whole run. */
    rate: z.number().finite().positive(),
    /** Gap distribution of the renewal process. */
    gaps: z.enum(['gamma', 'weibull']).default('gamma'),
    /** Coefficient of variation of the gaps (1 with gamma: Poisson). */
    cv: cvSchema.default(2),
    /** Slow swings of the rate: redrawn every windowS seconds with this cv (absent: none). */
    modulation: z.strictObject({ windowS: positiveSeconds, cv: cvSchema }).optional(),
    ...arrivalBounds,
    ...requestShape,
  })
  .refine(hasBound, NO_BOUND);
export type BurstyParams = z.input<typeof burstyParamsSchema>;

/** Standard normal (Box–Muller). */
function gauss(rng: () => number): number {
  const u = 1 - rng();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng());
}

/** Gamma(shape k, scale 1) by Marsaglia–Tsang; k < 1 boosted through Gamma(k + 1)·U^(1/k). */
export function gammaSample(rng: () => number, k: number): number {
  if (k < 1) return gammaSample(rng, k + 1) * Math.pow(1 - rng(), 1 / k);
  const d = k - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = gauss(rng);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = 1 - rng();
    if (Math.log(u) < 0.5 * x * x + d - d * v + d * Math.log(v)) return d * v;
  }
}

/** lnΓ (Lanczos, g = 7): enough precision to solve the Weibull shape for a cv. */
function lnGamma(x: number): number {
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - lnGamma(1 - x);
  const g = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  x -= 1;
  let a = g[0]!;
  const t = x + 7.5;
  for (let i = 1; i < 9; i++) a += g[i]! / (x + i);
  return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a);
}

/** Weibull shape whose cv is `cv` (cv falls as the shape grows; bisection on the log scale). */
export function weibullShapeForCv(cv: number): number {
  const cvOf = (k: number): number =>
    Math.sqrt(Math.max(0, Math.exp(lnGamma(1 + 2 / k) - 2 * lnGamma(1 + 1 / k)) - 1));
  let lo = 0.05;
  let hi = 50;
  for (let i = 0; i < 100; i++) {
    const mid = Math.sqrt(lo * hi);
    if (cvOf(mid) > cv) lo = mid;
    else hi = mid;
  }
  return Math.sqrt(lo * hi);
}

/** A gap sampler with mean 1. */
function unitGaps(kind: 'gamma' | 'weibull', cv: number, rng: () => number): () => number {
  if (kind === 'gamma') {
    const k = 1 / (cv * cv);
    return () => gammaSample(rng, k) / k;
  }
  const k = weibullShapeForCv(cv);
  const scale = 1 / Math.exp(lnGamma(1 + 1 / k));
  return () => scale * Math.pow(-Math.log(1 - rng()), 1 / k);
}

/** Send times within the bounds. The modulation only rescales gaps, so the long-run mean is `rate`. */
export function burstyTimes(p: z.output<typeof burstyParamsSchema>, seed: number): number[] {
  const gap = unitGaps(p.gaps, p.cv, createRng(deriveSeed(seed, 'arrivals')));
  const modRng = createRng(deriveSeed(seed, 'modulation'));
  const mod = p.modulation;
  const modK = mod ? 1 / (mod.cv * mod.cv) : 1;
  const end = p.durationS ?? Infinity;
  const count = p.count ?? Infinity;
  const out: number[] = [];
  // Time runs in "unit work" (one mean gap = 1) converted to seconds at the current window's rate,
  // so a gap that spans a window edge continues at the next window's rate (no restart bias).
  let t = p.startS;
  let windowEnd = mod ? t + mod.windowS : Infinity;
  let rate = mod ? (p.rate * gammaSample(modRng, modK)) / modK : p.rate;
  while (out.length < count) {
    let work = gap();
    for (;;) {
      const need = work / rate;
      if (t + need < windowEnd) {
        t += need;
        break;
      }
      work -= (windowEnd - t) * rate;
      t = windowEnd;
      windowEnd += mod!.windowS;
      // A tiny floor keeps a near-zero draw from stalling the stream for ages.
      rate = Math.max(p.rate * 1e-3, (p.rate * gammaSample(modRng, modK)) / modK);
    }
    if (t >= end) break;
    out.push(t);
  }
  return out;
}

export function burstyWorkload(params: BurstyParams, seed: number): ClientDriver {
  const p = parseParams(burstyParamsSchema, params);
  return openLoop(() => {
    const times = burstyTimes(p, seed);
    const shape = new ShapedRequests(p, seed, times.length);
    return times.map((at, i): ScheduledRequest => ({ at, request: shape.make(i) }));
  });
}
