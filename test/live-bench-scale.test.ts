// llmlb bench runs engines K× faster than model time: the workload-tracking policies' times (given
// in model seconds) are divided by K so the live router holds and classes requests as simulated.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scaledTrackerParams } from '../src/live-bench/live.js';

test('workload-tracking policies get their time parameters divided by the time scale', () => {
  const wa = scaledTrackerParams({ name: 'workload-aware', params: { kvCapacityTokens: 2304 } }, 4);
  assert.deepEqual(wa, {
    kvCapacityTokens: 2304,
    heavyPromptS: 0.5 / 4,
    heavyDecodeS: 5 / 4,
    priorPrefillS: 3.2e-4 / 4,
    priorDecodeS: 0.02 / 4,
  });
  // A value the scenario sets is scaled too; one of the wrong type is left for validation.
  const jsq = scaledTrackerParams({ name: 'jsq', params: { heavyDecodeS: 8, priorDecodeS: 'x' } }, 2);
  assert.equal(jsq?.heavyDecodeS, 4);
  assert.equal(jsq?.priorDecodeS, 'x');
  for (const name of ['max-capacity', 'min-min', 'rl'])
    assert.equal(scaledTrackerParams({ name }, 5)?.priorDecodeS, 0.02 / 5, name);
});

test('other policies, and real time, keep their parameters', () => {
  assert.deepEqual(scaledTrackerParams({ name: 'round-robin' }, 4), {});
  const p = { alpha: 0.3 };
  assert.equal(scaledTrackerParams({ name: 'estimated-wait', params: p }, 4), p);
  const wa = { kvCapacityTokens: 2304 };
  assert.equal(scaledTrackerParams({ name: 'workload-aware', params: wa }, 1), wa);
});
