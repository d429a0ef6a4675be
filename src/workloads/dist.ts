/**
 * Number distributions for workload parameters: token lengths, think times, turn counts.
 *
 * In YAML a distribution is either a bare number (fixed) or an object named by `dist`:
 *   512                                          fixed
 *   { dist: uniform, min: 10, max: 100 }         uniform on [min, max] (integers when sampled as lengths)
 *   { dist: normal, mean: 200, sd: 50 }          clamped to [min ?? 0, max ?? ∞]
 *   { dist: lognormal, mean: 300, sigma: 0.8 }   mean of the value, sigma of its log
 *   { dist: exponential, mean: 5 }               e.g. Poisson think times
 *   { dist: mixture, parts: [{ weight: 0.9, dist: uniform, min: 10, max: 60 }, …] }
 * Every shape takes optional `min`/`max` clamps. All sampling draws from the rng it is given, so a
 * seeded stream gives the same values every run.
 */
import { z } from 'zod';

const nonNeg = z.number().finite().nonnegative();
const clamps = { min: nonNeg.optional(), max: nonNeg.optional() };

const fixed = z.strictObject({ dist: z.literal('fixed'), value: nonNeg });
const uniform = z.strictObject({ dist: z.literal('uniform'), min: nonNeg, max: nonNeg });
const normal = z.strictObject({ dist: z.literal('normal'), mean: nonNeg, sd: nonNeg, ...clamps });
const lognormal = z.strictObject({
  dist: z.literal('lognormal'),
  mean: z.number().finite().positive(),
  sigma: nonNeg,
  ...clamps,
});
const exponential = z.strictObject({ dist: z.literal('exponential'), mean: nonNeg, ...clamps });

const basic = [fixed, uniform, normal, lognormal, exponential] as const;
const weight = { weight: z.number().finite().positive() };
const part = z.discriminatedUnion('dist', [
  fixed.extend(weight),
  uniform.extend(weight),
  normal.extend(weight),
  lognormal.extend(weight),
  exponential.extend(weight),
]);
const mixture = z.strictObject({ dist: z.literal('mixture'), parts: z.array(part).min(1), ...clamps });

const objectDist = z
  .discriminatedUnion('dist', [...basic, mixture])
  .refine((d) => d.dist !== 'uniform' || d.min <= d.max, { message: 'min must be <= max', path: ['max'] });

/** A distribution as written in config: a number (fixed) or `{ dist: …, … }`. */
export const DistSchema = z.preprocess(
  (v) => (typeof v === 'number' ? { dist: 'fixed', value: v } : v),
  objectDist,
);
export type Dist = z.output<typeof DistSchema>;
/** What may be written for a distribution (a number or an object). */
export type DistInput = number | Dist;

type BasicDist = Exclude<Dist, { dist: 'mixture' }>;

/** Standard normal draw (Box–Muller; uses two rng values so the stream advances predictably). */
function gauss(rng: () => number): number {
  const u = 1 - rng(); // (0, 1]
  const v = rng();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

function clamp(x: number, d: { min?: number | undefined; max?: number | undefined }): number {
  if (d.min !== undefined && x < d.min) x = d.min;
  if (d.max !== undefined && x > d.max) x = d.max;
  return x;
}

function sampleBasic(d: BasicDist, rng: () => number, integer: boolean): number {
  switch (d.dist) {
    case 'fixed':
      return d.value;
    case 'uniform':
      // Integer lengths are uniform over the inclusive integer range, as Python's randint.
      return integer
        ? Math.ceil(d.min) + Math.floor(rng() * (Math.floor(d.max) - Math.ceil(d.min) + 1))
        : d.min + rng() * (d.max - d.min);
    case 'normal':
      return clamp(Math.max(0, d.mean + d.sd * gauss(rng)), d);
    case 'lognormal': {
      const mu = Math.log(d.mean) - (d.sigma * d.sigma) / 2;
      return clamp(Math.exp(mu + d.sigma * gauss(rng)), d);
    }
    case 'exponential':
      return clamp(-d.mean * Math.log(1 - rng()), d);
  }
}

/** One draw (a real number). */
export function sample(d: Dist, rng: () => number): number {
  return sampleAny(d, rng, false);
}

/** One draw rounded to a non-negative integer (token counts, turn counts). */
export function sampleInt(d: Dist, rng: () => number): number {
  return Math.max(0, Math.round(sampleAny(d, rng, true)));
}

function sampleAny(d: Dist, rng: () => number, integer: boolean): number {
  if (d.dist !== 'mixture') return sampleBasic(d, rng, integer);
  let total = 0;
  for (const p of d.parts) total += p.weight;
  let r = rng() * total;
  let chosen = d.parts[d.parts.length - 1]!;
  for (const p of d.parts) {
    r -= p.weight;
    if (r < 0) {
      chosen = p;
      break;
    }
  }
  return clamp(sampleBasic(chosen, rng, integer), d);
}

/** The distribution's mean, ignoring `min`/`max` clamps (used by docs, tests and sanity checks). */
export function distMean(d: Dist): number {
  switch (d.dist) {
    case 'fixed':
      return d.value;
    case 'uniform':
      return (d.min + d.max) / 2;
    case 'normal':
    case 'lognormal':
    case 'exponential':
      return d.mean;
    case 'mixture': {
      let w = 0;
      let m = 0;
      for (const p of d.parts) {
        w += p.weight;
        m += p.weight * distMean(p);
      }
      return m / w;
    }
  }
}

/** Parse a distribution written in code (throws on a bad one). */
export function dist(input: DistInput): Dist {
  return DistSchema.parse(input);
}
