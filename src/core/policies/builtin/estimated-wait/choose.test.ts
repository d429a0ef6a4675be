import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chooseCandidate } from './choose.js';
import { WaitEstimator } from './estimator.js';
import { parseEstimatedWaitParams } from './params.js';
import { backendView } from '../../../testing.js';

/**
 * a has room; b is full and holds most of the prompt (a document); c is full and holds only its
 * first 512 tokens (a system prompt every engine was sent). Costs as priced: c cheapest, then b.
 */
function pick(params: Record<string, unknown>): string {
  const p = parseEstimatedWaitParams({ tieStdErrors: 0, ...params });
  const est = new WaitEstimator(p);
  const views = [backendView('a', 0), backendView('b', 1), backendView('c', 2)];
  est.bind(views);
  est.candCached.set([0, 20_000, 512]);
  const costs = Float64Array.from([10, 5, 3]);
  const open = Uint8Array.from([1, 0, 0]);
  return views[chooseCandidate(est, p, views, 3, costs, open, 0, 21_000, 100)]!.name;
}

test('chooseCandidate queues into a full engine only when it holds enough of the prompt (queueForCacheShare)', () => {
  // Any full engine holding some of the prompt may take it: c, for its system prompt alone.
  assert.equal(pick({ queueForCacheShare: 0 }), 'c');
  // With a share, only the engine holding (about) the most of it: b, the document's holder.
  assert.equal(pick({ queueForCacheShare: 0.5 }), 'b');
  assert.equal(pick({ queueForCacheShare: 1 }), 'b');
  // No engine may queue it: the one with room.
  assert.equal(pick({ queueForCache: false }), 'a');
});
