import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, scoresOf, chosen } from '../../../testing.js';
import { estimatedWait } from '../../builtin/estimated-wait/index.js';
import { createPolicy } from '../../index.js';

test('estimated-wait-scorer: 1 for the earliest finish, min/t elsewhere; argmax = the policy pick', () => {
  const s = makePlugin('scorer', 'estimated-wait-scorer', { defaultSlots: 1 });
  const p = createPolicy('estimated-wait', () => 0.5);
  const bs = [backendView('a', 0), backendView('b', 1), backendView('c', 2)];
  // Load a with two requests and b with one (same on the scorer's model and the policy's).
  const load = (id: string, i: number) => {
    const r = requestInfo(id, 'x'.repeat(400));
    s.onDispatch!(r, bs[i]!, 0);
    p.onDispatch!(r, bs[i]!, 0);
  };
  load('1', 0);
  load('2', 0);
  load('3', 1);
  const views = [
    backendView('a', 0, { inFlight: 2 }),
    backendView('b', 1, { inFlight: 1 }),
    backendView('c', 2, { inFlight: 0 }),
  ];
  const got = scoresOf(s, requestInfo('q', 'x'.repeat(400)), views, 10);
  assert.equal(got[2], 1);
  assert.ok(got[0]! < got[1]! && got[1]! < 1, JSON.stringify(got));
  assert.equal(chosen(p.pick(requestInfo('q', 'x'.repeat(400)), views, 10))?.name, 'c');
});

test('estimated-wait-scorer: scores the estimated-wait policy’s own estimates (min/t), without building the policy', () => {
  const s = makePlugin('scorer', 'estimated-wait-scorer', { defaultSlots: 2, prefixCredit: 0.5 });
  const p = estimatedWait({ random: () => 0, params: { defaultSlots: 2, prefixCredit: 0.5 } });
  const bs = [backendView('a', 0), backendView('b', 1), backendView('c', 2)];
  for (let i = 0; i < 7; i++) {
    const r = requestInfo(`r${i}`, `shared document ${i % 2}`.padEnd(300 + 50 * i, '.'));
    s.onDispatch!(r, bs[i % 3]!, 10 * i);
    p.onDispatch!(r, bs[i % 3]!, 10 * i);
  }
  const q = requestInfo('q', 'shared document 1'.padEnd(900, '.'));
  const est = new Float64Array(3);
  p.estimates(q, bs, 100, est);
  const min = Math.min(...est);
  assert.deepEqual(
    scoresOf(s, q, bs, 100),
    Array.from(est, (t) => min / t),
  );
  // Its parameters are validated as the policy's, under the policy's name.
  assert.throws(
    () => makePlugin('scorer', 'estimated-wait-scorer', { alpha: 2 }),
    /policy 'estimated-wait' parameters: alpha/,
  );
});
