import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, scoresOf } from '../../../testing.js';

const req = requestInfo('r');
const metrics = (waiting: number, at = 0) => ({ running: 4, waiting, kvUsage: 0.5, at });

test('queue-scorer: fewest waiting 1, most 0, the rest in proportion', () => {
  const s = makePlugin('scorer', 'queue-scorer');
  const bs = [
    backendView('a', 0, { metrics: metrics(0) }),
    backendView('b', 1, { metrics: metrics(5) }),
    backendView('c', 2, { metrics: metrics(10) }),
  ];
  assert.deepEqual(scoresOf(s, req, bs), [1, 0.5, 0]);
});

test('queue-scorer: all equal → all 1', () => {
  const s = makePlugin('scorer', 'queue-scorer');
  const bs = [backendView('a', 0, { metrics: metrics(3) }), backendView('b', 1, { metrics: metrics(3) })];
  assert.deepEqual(scoresOf(s, req, bs), [1, 1]);
});

test('queue-scorer credits pushes since the scrape, and falls back to in-flight when stale', () => {
  const s = makePlugin('scorer', 'queue-scorer', { staleAfterMs: 1000 });
  // Both scraped empty; the router has since pushed 4 to a: a is the busier one now.
  const bs = [
    backendView('a', 0, { metrics: metrics(0), dispatchedSinceMetrics: 4 }),
    backendView('b', 1, { metrics: metrics(0) }),
  ];
  assert.deepEqual(scoresOf(s, req, bs, 500), [0, 1]);
  // 5 s later the scrape is stale: in-flight counts (a 1, b 3).
  const stale = [
    backendView('a', 0, { metrics: metrics(0), inFlight: 1 }),
    backendView('b', 1, { metrics: metrics(0), inFlight: 3 }),
  ];
  assert.deepEqual(scoresOf(s, req, stale, 5000), [1, 0]);
});
