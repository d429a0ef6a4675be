import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, scoresOf } from '../../../testing.js';

test('kv-cache-utilization-scorer: 1 − usage; unknown or stale usage is neutral 0.5', () => {
  const s = makePlugin('scorer', 'kv-cache-utilization-scorer', { staleAfterMs: 1000 });
  const bs = [
    backendView('a', 0, { metrics: { running: 1, waiting: 0, kvUsage: 0.2, at: 0 } }),
    backendView('b', 1, { metrics: { running: 1, waiting: 0, kvUsage: 0.9, at: 0 } }),
    backendView('c', 2),
  ];
  const got = scoresOf(s, requestInfo('r'), bs, 500);
  assert.ok(Math.abs(got[0]! - 0.8) < 1e-12 && Math.abs(got[1]! - 0.1) < 1e-12 && got[2] === 0.5);
  assert.deepEqual(scoresOf(s, requestInfo('r'), bs, 5000), [0.5, 0.5, 0.5]);
});
