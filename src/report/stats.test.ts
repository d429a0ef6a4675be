import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ascending, percentile } from './stats.js';

test('percentile is nearest-rank over ascending values', () => {
  const xs = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
  assert.equal(percentile(xs, 0.5), 5);
  assert.equal(percentile(xs, 0.9), 9);
  assert.equal(percentile(xs, 0.95), 10);
  assert.equal(percentile(xs, 0.99), 10);
  assert.equal(percentile(xs, 0), 1);
  assert.equal(percentile(xs, 1), 10);
  assert.equal(percentile([7], 0.5), 7);
});

test('percentile of nothing is NaN, not a zero latency', () => {
  assert.ok(Number.isNaN(percentile([], 0.5)));
});

test('percentile reads typed arrays too', () => {
  assert.equal(percentile(Float64Array.from([0.5, 1.5, 2.5, 3.5]), 0.5), 1.5);
});

test('ascending sorts a copy numerically', () => {
  const xs = [10, 9, 100, 1];
  assert.deepEqual(ascending(xs), [1, 9, 10, 100]);
  assert.deepEqual(xs, [10, 9, 100, 1]);
  assert.deepEqual(ascending(new Set([3, 1, 2])), [1, 2, 3]);
});
