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

/**
 * Three open engines whose costs tie (within tieTolerance): a is idle, b has two in flight and holds
 * most of the prompt, c has one in flight and holds only the system prompt a also holds.
 */
function tiePick(params: Record<string, unknown>): string {
  const p = parseEstimatedWaitParams({ tieStdErrors: 0, ...params });
  const est = new WaitEstimator(p);
  const views = [
    backendView('a', 0),
    backendView('b', 1, { inFlight: 2 }),
    backendView('c', 2, { inFlight: 1 }),
  ];
  est.bind(views);
  est.candCached.set([512, 20_000, 512]);
  const costs = Float64Array.from([5, 5.05, 5.1]);
  const open = Uint8Array.from([1, 1, 1]);
  return views[chooseCandidate(est, p, views, 3, costs, open, 0, 21_000, 100)]!.name;
}

test('chooseCandidate breaks a tie for the engine holding more of the prompt (tieByCache)', () => {
  // The holder, though it runs more and is not the lowest estimate.
  assert.equal(tiePick({}), 'b');
  // Off: fewer in flight first, the idle engine (a 20k-token miss).
  assert.equal(tiePick({ tieByCache: false }), 'a');
  // Beyond the tie tolerance the lowest cost decides, holder or not.
  assert.equal(tiePick({ tieTolerance: 0 }), 'a');
});

test('chooseCandidate ignores equal cached prefixes in a tie: fewer in flight decides', () => {
  const p = parseEstimatedWaitParams({ tieStdErrors: 0 });
  const est = new WaitEstimator(p);
  const views = [backendView('a', 0, { inFlight: 3 }), backendView('b', 1, { inFlight: 1 })];
  est.bind(views);
  est.candCached.set([512, 512]);
  const at = chooseCandidate(
    est,
    p,
    views,
    2,
    Float64Array.from([5, 5.05]),
    Uint8Array.from([1, 1]),
    0,
    2000,
    10,
  );
  assert.equal(views[at]!.name, 'b');
});
