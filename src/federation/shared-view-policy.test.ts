import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy } from '../core/policies/index.js';
import { createRng } from '../core/rng.js';
import { backendView, requestInfo } from '../core/testing.js';
import { withSharedView } from './shared-view-policy.js';

// Issue #31: the wrapper dropped every hook but pick and the dispatch callbacks, so estimated-wait's
// held requests lost their response-ratio order behind a shared view.
test('withSharedView keeps the inner policy hooks: held-request order, holds on load', () => {
  const inner = createPolicy('estimated-wait', createRng(1));
  let others = 0;
  const p = withSharedView(inner, () => others);
  assert.ok(inner.responseRatio && inner.heldByLoad);
  assert.ok(p.responseRatio, 'responseRatio passed through');
  assert.equal(typeof p.heldByLoad, 'function');
  const req = requestInfo('r', 'hello there');
  assert.equal(p.responseRatio.size(req), inner.responseRatio.size(req));
  assert.equal(p.responseRatio.epoch(), inner.responseRatio.epoch());
  // holdsAll reads the shown in-flight counts: the others' load can make every backend full.
  const c = [backendView('a', 0), backendView('b', 1)];
  assert.equal(p.responseRatio.holdsAll?.(c), false);
  others = 1000;
  assert.equal(p.responseRatio.holdsAll?.(c), true);
  assert.equal(p.pick(req, c, 0), undefined);
  assert.equal(p.heldByLoad!(), true);
  others = 0;
  assert.equal(p.pick(req, c, 0)?.name, 'a');
});

test('withSharedView adds the others’ pushes and answers since the last metrics read', () => {
  const seen: number[] = [];
  const inner = {
    name: 'probe',
    pick(_r: unknown, c: readonly ReturnType<typeof backendView>[]) {
      for (const b of c) seen.push(b.inFlight, b.dispatchedSinceMetrics, b.completedSinceMetrics);
      return c[0];
    },
  };
  const p = withSharedView(
    inner,
    () => 2,
    () => ({ dispatched: 3, completed: 1 }),
  );
  const a = backendView('a', 0, { inFlight: 1, dispatchedSinceMetrics: 1 });
  assert.equal(p.pick(requestInfo('x'), [a], 0), a, 'the scheduler gets its own view back');
  assert.deepEqual(seen, [3, 4, 1]);
});
