import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newBackendState } from './backend-state.js';
import { Rates } from './rates.js';

test('rates: priors before any sample, the fits after; bestCost is the fastest measured backend', () => {
  const rates = new Rates(0.001, 0.05);
  const slow = newBackendState('slow', 0.1);
  const fast = newBackendState('fast', 0.1);
  const unmeasured = newBackendState('new', 0.1);
  assert.equal(rates.prefillS(slow, 200), 200 * 0.001);
  assert.equal(rates.decodeS(slow, 3), 0.05);
  assert.equal(rates.bestCost([slow, fast, unmeasured], 100, 10), undefined);
  slow.prefill.update(100, 0.4);
  slow.decode.update(1, 0.04);
  slow.lastSampleAt = 1;
  fast.prefill.update(100, 0.1);
  fast.decode.update(1, 0.01);
  fast.lastSampleAt = 1;
  assert.ok(Math.abs(rates.prefillS(fast, 300) - 0.3) < 1e-12);
  assert.equal(rates.decodeS(fast, 1), 0.01);
  assert.equal(rates.bestCost([slow, fast, unmeasured], 100, 10), fast);
  // Unmeasured backends are never the best, however their priors compare.
  assert.equal(rates.bestCost([unmeasured, slow], 100, 10), slow);
});
