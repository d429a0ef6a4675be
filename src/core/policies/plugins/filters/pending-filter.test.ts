import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo } from '../../../testing.js';
import type { EngineMetrics } from '../../../types.js';

const names = (xs: readonly { name: string }[]) => xs.map((x) => x.name);
const m = (waiting: number, running = 4, at = 0): EngineMetrics => ({ waiting, running, kvUsage: 0.5, at });

test('pending-filter keeps backends whose engine has no waiting request (SP-P)', () => {
  const f = makePlugin('filter', 'pending-filter');
  const bs = [
    backendView('a', 0, { metrics: m(0), inFlight: 30 }),
    backendView('b', 1, { metrics: m(2), inFlight: 1 }),
    backendView('c', 2, { metrics: m(0) }),
  ];
  // Outstanding counts do not matter, only pending ones: a is free although it runs 30.
  assert.deepEqual(names(f.filter(requestInfo('r'), bs, 10)), ['a', 'c']);
  assert.deepEqual(f.filter(requestInfo('r'), [bs[1]!], 10), []);
});

test('between probes the router’s own pushes count as waiting until completions or a probe say otherwise', () => {
  const f = makePlugin('filter', 'pending-filter');
  const req = requestInfo('r');
  // One push since the probe: it may not have joined the batch yet, so the backend is held.
  const pushed = backendView('a', 0, { metrics: m(0), dispatchedSinceMetrics: 1 });
  assert.deepEqual(f.filter(req, [pushed], 20), []);
  // A completion since then freed a batch slot for it.
  const freed = backendView('a', 0, { metrics: m(0), dispatchedSinceMetrics: 1, completedSinceMetrics: 1 });
  assert.equal(f.filter(req, [freed], 20).length, 1);
  // Two waiting at the probe, three completed since: room again.
  const drained = backendView('a', 0, { metrics: m(2), dispatchedSinceMetrics: 0, completedSinceMetrics: 3 });
  assert.equal(f.filter(req, [drained], 20).length, 1);
  // Old metrics are still used: the correction tracks every push and completion.
  assert.equal(f.filter(req, [backendView('a', 0, { metrics: m(0, 4, 0) })], 1e9).length, 1);
});

test('maxWaiting lets a small engine queue through; without metrics a backend takes one at a time', () => {
  const f = makePlugin('filter', 'pending-filter', { maxWaiting: 2 });
  assert.equal(f.filter(requestInfo('r'), [backendView('a', 0, { metrics: m(2) })], 0).length, 1);
  assert.equal(f.filter(requestInfo('r'), [backendView('a', 0, { metrics: m(3) })], 0).length, 0);
  const g = makePlugin('filter', 'pending-filter');
  assert.equal(g.filter(requestInfo('r'), [backendView('a', 0)], 0).length, 1);
  assert.equal(g.filter(requestInfo('r'), [backendView('a', 0, { inFlight: 1 })], 0).length, 0);
  const h = makePlugin('filter', 'pending-filter', { withoutMetricsMaxOutstanding: 4 });
  assert.equal(h.filter(requestInfo('r'), [backendView('a', 0, { inFlight: 3 })], 0).length, 1);
});

test('pending-filter asks for probes at its interval (default 50 ms) and validates parameters', () => {
  assert.equal(makePlugin('filter', 'pending-filter').traits?.metricsIntervalMs, 50);
  assert.equal(makePlugin('filter', 'pending-filter', { probeIntervalMs: 20 }).traits?.metricsIntervalMs, 20);
  assert.throws(() => makePlugin('filter', 'pending-filter', { probeIntervalMs: 0 }), /probeIntervalMs/);
  assert.throws(() => makePlugin('filter', 'pending-filter', { maxWaiting: -1 }), /maxWaiting/);
});

test('the filter’s reused answer stays right when it is fed back to the same filter', () => {
  const f = makePlugin('filter', 'pending-filter');
  const bs = [
    backendView('a', 0, { metrics: m(1) }),
    backendView('b', 1, { metrics: m(0) }),
    backendView('c', 2, { metrics: m(0) }),
    backendView('d', 3, { metrics: m(3) }),
  ];
  const first = f.filter(requestInfo('r'), bs, 0);
  assert.deepEqual(names(first), ['b', 'c']);
  // The same filter twice in a chain: the input is its own buffer (b got a push in between).
  const b = backendView('b', 1, { metrics: m(0) });
  const inner = f.filter(requestInfo('r'), [b, backendView('x', 4, { metrics: m(2) }), bs[2]!], 0);
  assert.deepEqual(names(inner), ['b', 'c']);
  (b as { dispatchedSinceMetrics: number }).dispatchedSinceMetrics = 1;
  assert.deepEqual(names(f.filter(requestInfo('r'), inner, 0)), ['c']);
  // A later pick reuses the buffer; the answer is that pick's alone.
  assert.deepEqual(names(f.filter(requestInfo('r'), [bs[0]!, bs[2]!], 0)), ['c']);
});
