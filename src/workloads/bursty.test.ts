import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRng } from '../core/rng.js';
import { burstyParamsSchema, burstyTimes, burstyWorkload, gammaSample, weibullShapeForCv } from './bursty.js';

const gapsOf = (ts: number[]): number[] => ts.slice(1).map((t, i) => t - ts[i]!);
const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const cv = (xs: number[]): number => {
  const m = mean(xs);
  return Math.sqrt(mean(xs.map((x) => (x - m) ** 2))) / m;
};

test('gammaSample has mean k (shape below and above 1)', () => {
  for (const k of [0.25, 1, 4]) {
    const rng = createRng(7);
    const xs = Array.from({ length: 40000 }, () => gammaSample(rng, k));
    assert.ok(Math.abs(mean(xs) / k - 1) < 0.03, `k=${k}: mean ${mean(xs)}`);
    assert.ok(Math.abs(cv(xs) - 1 / Math.sqrt(k)) < 0.06, `k=${k}: cv ${cv(xs)}`);
  }
});

test('weibullShapeForCv: shape 1 is cv 1 (exponential), heavier tails need shapes below 1', () => {
  assert.ok(Math.abs(weibullShapeForCv(1) - 1) < 1e-3);
  assert.ok(weibullShapeForCv(2) < 0.7);
  assert.ok(weibullShapeForCv(0.5) > 2);
});

for (const gaps of ['gamma', 'weibull'] as const) {
  test(`bursty (${gaps} gaps): long-run rate and gap cv as asked`, () => {
    const p = burstyParamsSchema.parse({ rate: 5, cv: 2, gaps, durationS: 4000 });
    const ts = burstyTimes(p, 3);
    assert.ok(Math.abs(ts.length / 4000 / 5 - 1) < 0.06, `rate ${ts.length / 4000}`);
    const g = gapsOf(ts);
    assert.ok(Math.abs(cv(g) - 2) < 0.25, `cv ${cv(g)}`);
    assert.ok(ts.every((t, i) => i === 0 || t >= ts[i - 1]!));
  });
}

test('modulation: the rate swings between windows but keeps its mean; Poisson within', () => {
  const p = burstyParamsSchema.parse({
    rate: 4,
    cv: 1,
    modulation: { windowS: 20, cv: 0.8 },
    durationS: 8000,
  });
  const ts = burstyTimes(p, 5);
  assert.ok(Math.abs(ts.length / 8000 / 4 - 1) < 0.1, `rate ${ts.length / 8000}`);
  const perWindow = new Array<number>(400).fill(0);
  for (const t of ts) perWindow[Math.floor(t / 20)]!++;
  // Poisson counts of mean 80 would have cv ~0.11; the modulation makes it ~0.8.
  assert.ok(cv(perWindow) > 0.5, `window cv ${cv(perWindow)}`);
});

test('bursty workload: count bound, lognormal lengths with the asked mean, same seed same requests', () => {
  const spec = {
    rate: 10,
    count: 3000,
    promptTokens: { dist: 'lognormal' as const, mean: 1150, sigma: 1 },
    outputTokens: { dist: 'lognormal' as const, mean: 259, sigma: 1 },
  };
  const a = burstyWorkload(spec, 9).start();
  const b = burstyWorkload(spec, 9).start();
  assert.equal(a.length, 3000);
  assert.deepEqual(a, b);
  const out = mean(a.map((s) => s.request.outputTokens));
  assert.ok(Math.abs(out / 259 - 1) < 0.08, `output mean ${out}`);
});

test('bursty: bad params are rejected naming the field', () => {
  assert.equal(burstyParamsSchema.safeParse({ rate: 1 }).success, false); // no bound
  const r = burstyParamsSchema.safeParse({ rate: 1, durationS: 10, cv: -1 });
  assert.equal(r.success, false);
  assert.deepEqual(r.error?.issues[0]?.path, ['cv']);
});
