import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView } from '../../../testing.js';
import { newBackendState } from './backend-state.js';
import { roomInside, slotsOf, slotsOfLearned } from './slots.js';

const metrics = (running: number, waiting: number) => ({ running, waiting, kvUsage: 0, at: 0 });

test('slots: the default until learned, no limit once seen batching, the queue point when seen', () => {
  const b = newBackendState('a', 0.1);
  const v = backendView('a', 0);
  assert.equal(slotsOf(b, v, 1), 1);
  assert.equal(slotsOf(b, v, 4), 4);
  b.slots = 3; // seen running 3 at once, never queued: a batching engine with no limit seen
  assert.equal(slotsOf(b, v, 1), Infinity);
  assert.equal(slotsOfLearned(b, 1), Infinity);
  b.queuedAt = 5; // a request queued with 5 ahead
  assert.equal(slotsOf(b, v, 1), 5);
  assert.equal(slotsOfLearned(b, 1), 3);
  // The backend's maxConcurrency caps whatever was learned.
  assert.equal(slotsOf(b, backendView('a', 0, { maxConcurrency: 2 }), 1), 2);
});

test('slots: engine metrics win — requests waiting inside mean it admits no more than it runs', () => {
  const b = newBackendState('a', 0.1);
  b.queuedAt = 2;
  assert.equal(slotsOf(b, backendView('a', 0, { metrics: metrics(6, 1) }), 1), 6);
  assert.equal(slotsOf(b, backendView('a', 0, { metrics: metrics(6, 0) }), 1), Infinity);
  assert.equal(slotsOf(b, backendView('a', 0, { metrics: metrics(0, 3) }), 1), 1);
});

test('roomInside: requests an engine takes before one pushed there would queue behind another', () => {
  const b = newBackendState('a', 0.1);
  // Nothing known: one slot, and one may wait inside.
  assert.equal(roomInside(b, backendView('a', 0, { inFlight: 0 }), 1), 2);
  assert.equal(roomInside(b, backendView('a', 0, { inFlight: 2 }), 1), 0);
  b.slots = 4; // batching, no limit seen
  assert.equal(roomInside(b, backendView('a', 0, { inFlight: 50 }), 1), Infinity);
  // From metrics: one waiting inside and one pushed since → no room; one completed since → room.
  const waiting = { metrics: metrics(4, 1), dispatchedSinceMetrics: 1, completedSinceMetrics: 0 };
  assert.equal(roomInside(b, backendView('a', 0, waiting), 1), 0);
  const freed = { metrics: metrics(4, 1), dispatchedSinceMetrics: 1, completedSinceMetrics: 2 };
  assert.equal(roomInside(b, backendView('a', 0, freed), 1), 1);
});
