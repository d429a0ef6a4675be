import { test } from 'node:test';
import assert from 'node:assert/strict';
import { splitWall, WallRegression } from './wall-split.js';

test('a wall time is split in the ratio of the current model, both parts scaled to fit it', () => {
  // Model: 100 prompt tokens × 1 ms = 0.1 s, 200 output tokens × 20 ms = 4 s; the answer took 8.2 s.
  const s = splitWall(8.2, 100, 200, 0.001, 0.02)!;
  assert.ok(Math.abs(s.prefillS - 0.2) < 1e-12);
  assert.ok(Math.abs(s.decodeSPerToken - 0.04) < 1e-12);
  // Together they are the wall time: nothing is booked as prefill alone.
  assert.ok(Math.abs(s.prefillS + 200 * s.decodeSPerToken - 8.2) < 1e-9);
});

test('the issue #34 case: 1 prompt token, 223 output tokens, 4.04 s is mostly decode', () => {
  const s = splitWall(4.04, 1, 223, 0.001, 0.05)!;
  assert.ok(s.prefillS < 0.001, `prefill ${s.prefillS}`);
  assert.ok(Math.abs(s.decodeSPerToken - 4.04 / 223) < 1e-3, `decode ${s.decodeSPerToken}`);
});

test('zero output tokens: the whole time is prefill; zero prompt tokens: all decode', () => {
  assert.deepEqual(splitWall(2, 10, 0, 0.001, 0.05), { prefillS: 2, decodeSPerToken: 0 });
  const d = splitWall(2, 0, 40, 0.001, 0.05)!;
  assert.equal(d.prefillS, 0);
  assert.ok(Math.abs(d.decodeSPerToken - 0.05) < 1e-12);
});

test('nothing learnable gives undefined, never NaN or Infinity', () => {
  const bad = [NaN, Infinity, -1, 0];
  for (const w of bad) assert.equal(splitWall(w, 10, 10, 0.001, 0.05), undefined);
  assert.equal(splitWall(1, 0, 0, 0.001, 0.05), undefined);
  assert.equal(splitWall(1, 10, 10, 0, 0), undefined);
  assert.equal(splitWall(1, NaN, NaN, NaN, NaN), undefined);
  for (const [p, c, pp, dd] of [
    [Infinity, 10, 0.001, 0.05],
    [10, Infinity, 0.001, 0.05],
    [10, 10, Infinity, 0.05],
    [10, 10, 1e-300, 1e-300],
  ] as const) {
    const s = splitWall(1, p, c, pp, dd);
    if (s) assert.ok(Number.isFinite(s.prefillS) && Number.isFinite(s.decodeSPerToken));
  }
});

test('whole answers of varied sizes tell prefill from decode (a ratio no rescaling finds)', () => {
  const r = new WallRegression(0.05);
  assert.equal(r.rates(), undefined, 'no samples');
  // A GPU-like engine: 0.1 ms per prompt token, 20 ms per output token (1 : 200).
  for (let i = 0; i < 30; i++) {
    const p = 50 + ((i * 37) % 11) * 300;
    const c = 10 + ((i * 13) % 7) * 60;
    r.update(p, c, p * 0.0001 + c * 0.02);
  }
  const x = r.rates()!;
  assert.ok(Math.abs(x.prefillSPerToken - 0.0001) < 1e-9, `prefill ${x.prefillSPerToken}`);
  assert.ok(Math.abs(x.decodeSPerToken - 0.02) < 1e-9, `decode ${x.decodeSPerToken}`);
});

test('answers whose sizes move together identify nothing; bad samples are ignored', () => {
  const r = new WallRegression(0.05);
  for (let i = 1; i <= 20; i++) r.update(10 * i, 5 * i, i); // C = P/2 always: not identifiable
  assert.equal(r.rates(), undefined);
  const q = new WallRegression(0.05);
  for (const [p, c, w] of [
    [NaN, 1, 1],
    [1, Infinity, 1],
    [1, 1, -1],
    [0, 0, 1],
  ] as const)
    q.update(p, c, w);
  assert.equal(q.rates(), undefined);
  // A fit that says one rate is negative (noise) is not used.
  const n = new WallRegression(0.05);
  for (const [p, c, w] of [
    [100, 10, 0.1],
    [1000, 10, 0.05],
    [100, 100, 2],
    [1000, 100, 1.9],
  ] as const)
    n.update(p, c, w);
  assert.equal(n.rates(), undefined);
});
