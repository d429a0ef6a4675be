import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo } from '../../../testing.js';

const names = (xs: readonly { name: string }[]) => xs.map((x) => x.name);

test('outstanding-filter keeps backends below the threshold (SP-O)', () => {
  const f = makePlugin('filter', 'outstanding-filter', { maxOutstanding: 2 });
  const bs = [
    backendView('a', 0, { inFlight: 2 }),
    backendView('b', 1, { inFlight: 1 }),
    backendView('c', 2, { inFlight: 0 }),
    backendView('d', 3, { inFlight: 5 }),
  ];
  assert.deepEqual(names(f.filter(requestInfo('r'), bs, 0)), ['b', 'c']);
  // All full: nothing left, so the profile holds the request in the router queue.
  assert.deepEqual(f.filter(requestInfo('r'), [bs[0]!, bs[3]!], 0), []);
  // All below: the same array comes back.
  const free = [bs[1]!, bs[2]!];
  assert.equal(f.filter(requestInfo('r'), free, 0), free);
});

test('outstanding-filter validates its parameter', () => {
  assert.throws(() => makePlugin('filter', 'outstanding-filter', { maxOutstanding: 0 }), /maxOutstanding/);
  assert.throws(() => makePlugin('filter', 'outstanding-filter', { max: 3 }), /max/);
  assert.equal(makePlugin('filter', 'outstanding-filter').traits?.metricsIntervalMs, undefined);
});
