import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy } from '../core/policies/index.js';
import { createRng } from '../core/rng.js';
import { backendView, requestInfo, chosen } from '../core/testing.js';
import { HOLD } from '../core/types.js';
import { withSharedView } from './shared-view-policy.js';

// Issue #31: the wrapper dropped every hook but pick and the dispatch callbacks, so estimated-wait's
// held requests lost their response-ratio order behind a shared view.
test('withSharedView keeps the inner policy hooks: held-request order, holds on load', () => {
  const inner = createPolicy('estimated-wait', createRng(1));
  let others = 0;
  const p = withSharedView(inner, () => others);
  const io = inner.queueOrder;
  const po = p.queueOrder;
  assert.ok(io?.kind === 'response-ratio');
  assert.ok(po?.kind === 'response-ratio', 'queueOrder passed through');
  assert.equal(p.traits, inner.traits);
  const req = requestInfo('r', 'hello there');
  assert.equal(po.size(req), io.size(req));
  assert.equal(po.epoch(), io.epoch());
  // holdsAll reads the shown in-flight counts: the others' load can make every backend full.
  const c = [backendView('a', 0), backendView('b', 1)];
  assert.equal(po.holdsAll?.(c), false);
  others = 1000;
  assert.equal(po.holdsAll?.(c), true);
  assert.equal(p.pick(req, c, 0), HOLD.load);
  others = 0;
  assert.equal(chosen(p.pick(req, c, 0))?.name, 'a');
});

test('withSharedView adds the others’ pushes and answers since the last metrics read', () => {
  const seen: number[] = [];
  const inner = {
    name: 'probe',
    pick(_r: unknown, c: readonly ReturnType<typeof backendView>[]) {
      for (const b of c) seen.push(b.inFlight, b.dispatchedSinceMetrics, b.completedSinceMetrics);
      return c[0]!;
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
