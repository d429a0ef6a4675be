import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { backendView } from '../../../testing.js';
import type { BackendView } from '../../../types.js';
import { keepWhere } from './keep-where.js';

const names = (xs: readonly BackendView[]) => xs.map((x) => x.name);

test('keepWhere keeps the passing candidates in order, reusing its array from call to call', () => {
  const bs = ['a', 'b', 'c', 'd', 'e'].map((n, i) => backendView(n, i, { inFlight: i }));
  const into: BackendView[] = [];
  const keep = (pass: (b: BackendView) => boolean) => keepWhere(bs, pass, 0, into);
  // All pass: the input itself.
  assert.equal(
    keep(() => true),
    bs,
  );
  // None pass: empty, and the reused array is not touched.
  assert.deepEqual(
    keep(() => false),
    [],
  );
  assert.equal(into.length, 0);
  assert.deepEqual(names(keep((b) => b.inFlight !== 1)), ['a', 'c', 'd', 'e']);
  // Fewer than last time: the stale tail is cut off.
  assert.deepEqual(names(keep((b) => b.inFlight >= 3)), ['d', 'e']);
  assert.deepEqual(names(keep((b) => b.inFlight === 0)), ['a']);
  assert.deepEqual(names(keep((b) => b.inFlight === 4)), ['e']);
  assert.deepEqual(names(keep((b) => b.inFlight % 2 === 1)), ['b', 'd']);
  // The same filter twice in a chain: its own answer as input gives a new array.
  const first = keep((b) => b.inFlight > 0);
  const second = keepWhere(first, (b) => b.inFlight < 4, 0, into);
  assert.notEqual(second, into);
  assert.deepEqual(names(second), ['b', 'c', 'd']);
});

test('property: keepWhere equals Array.prototype.filter over any sequence of calls', () => {
  const into: BackendView[] = [];
  const bs = Array.from({ length: 8 }, (_, i) => backendView(`b${i}`, i, { inFlight: i }));
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 8 }), fc.integer({ min: 0, max: 255 })), { maxLength: 20 }),
      (calls) => {
        for (const [len, mask] of calls) {
          const c = bs.slice(0, len);
          const pass = (b: BackendView) => ((mask >> b.index) & 1) === 1;
          assert.deepEqual(names(keepWhere(c, pass, 0, into)), names(c.filter(pass)));
        }
      },
    ),
  );
});
