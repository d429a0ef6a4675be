import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffMs } from './backoff.js';

test('backoff doubles from base, is capped, and keeps at least half the delay', () => {
  assert.equal(backoffMs(1, 1000, 60_000, 0), 500);
  assert.equal(backoffMs(1, 1000, 60_000, 0.999999), 1000);
  assert.equal(backoffMs(2, 1000, 60_000, 0.5), 1500);
  assert.equal(backoffMs(3, 1000, 60_000, 0), 2000);
  assert.equal(backoffMs(20, 1000, 60_000, 0.999999), 60_000);
});

test('backoff clamps out-of-range randomness and attempts below 1', () => {
  assert.equal(backoffMs(1, 100, 1000, -3), 50);
  assert.equal(backoffMs(1, 100, 1000, 7), 100);
  assert.equal(backoffMs(0, 100, 1000, 0), 50);
});
