import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LinearFit } from './linear-fit.js';
import { createRng } from '../rng.js';

test('recovers a line from noisy samples; stderr shrinks with more of them', () => {
  const f = new LinearFit({ alpha: 0.01, minSpread: 0.5 });
  const rng = createRng(1);
  let early = 0;
  for (let i = 0; i < 2000; i++) {
    const x = 1 + Math.floor(rng() * 20);
    f.update(x, 0.014 + 0.001 * x + (rng() - 0.5) * 0.004);
    if (i === 20) early = f.stderr(10);
  }
  assert.ok(Math.abs(f.slope! - 0.001) < 1e-4, `slope ${f.slope}`);
  assert.ok(Math.abs(f.at(10)! - 0.024) < 3e-4, `at(10) ${f.at(10)}`);
  assert.ok(f.stderr(10) < early && f.stderr(10) > 0);
});

test('no slope without spread: flat, or a ratio through the origin', () => {
  const flat = new LinearFit({ alpha: 0.2, minSpread: 0.5 });
  const ratio = new LinearFit({ alpha: 0.2, minSpread: 8, throughOrigin: true });
  for (let i = 0; i < 10; i++) {
    flat.update(1, 0.01);
    ratio.update(100, 0.1);
  }
  assert.equal(flat.slope, 0);
  assert.ok(Math.abs(flat.at(30)! - 0.01) < 1e-12);
  assert.ok(Math.abs(ratio.at(300)! - 0.3) < 1e-12);
  assert.ok(flat.stderr(1) < 1e-9);
});

test('the slope is clamped: never negative, never below zero at x = 0', () => {
  const f = new LinearFit({ alpha: 0.1, minSpread: 0.5 });
  for (let i = 0; i < 50; i++) f.update(i % 10, 1 - 0.05 * (i % 10));
  assert.equal(f.slope, 0);
  const g = new LinearFit({ alpha: 0.1, minSpread: 0.5 });
  for (let i = 0; i < 50; i++) g.update(1 + (i % 10), Math.max(0, (i % 10) - 3));
  assert.ok(g.at(0)! >= 0);
});

test('bad samples are ignored; before any sample there is no estimate', () => {
  const f = new LinearFit({ alpha: 0.1, minSpread: 0.5 });
  assert.equal(f.at(1), undefined);
  f.update(NaN, 1);
  f.update(1, Infinity);
  f.update(1, -1);
  f.update(1, 1, 0);
  assert.equal(f.samples, 0);
  f.update(2, 3);
  assert.equal(f.at(5), 3);
});

test('the fit read between updates is the one its sums give after each update (cached, not stale)', () => {
  for (const opts of [
    { alpha: 0.05, minSpread: 8, throughOrigin: true },
    { alpha: 0.05, minSpread: 0.5 },
  ]) {
    const f = new LinearFit(opts);
    const rng = createRng(3);
    let w = 0;
    let sx = 0;
    let sy = 0;
    let sxx = 0;
    let sxy = 0;
    for (let i = 0; i < 300; i++) {
      // Bad samples (ignored) among good ones; spread grows after the first 20 samples.
      const bad = i % 17 === 5;
      const x = bad ? -1 : i < 20 ? 40 + rng() * 4 : rng() * 400;
      const y = 0.001 * x + rng() * 0.01;
      f.update(x, y);
      if (!bad) {
        const keep = w === 0 ? 0 : 1 - opts.alpha;
        w = keep * w + 1;
        sx = keep * sx + x;
        sy = keep * sy + y;
        sxx = keep * sxx + x * x;
        sxy = keep * sxy + x * y;
      }
      const mx = sx / w;
      const my = sy / w;
      const varX = Math.max(0, sxx / w - mx * mx);
      const cap = mx > 0 ? my / mx : 0;
      const slope =
        varX < opts.minSpread * opts.minSpread
          ? opts.throughOrigin === true
            ? cap
            : 0
          : Math.min(cap, Math.max(0, (sxy / w - mx * my) / varX));
      assert.equal(f.slope, slope, `slope after sample ${i}`);
      assert.equal(f.at(123), Math.max(0, my + slope * (123 - mx)), `at(123) after sample ${i}`);
    }
  }
});
