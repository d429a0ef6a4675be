// Policy.requestClass: every workload-tracking policy answers a dispatched request's class on its
// backend (for /admin/decisions), through the profile and policy-picker wrappers; others answer none.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy } from './index.js';
import { createRng } from '../rng.js';
import { backendView, requestInfo, chosen } from '../testing.js';

const backends = [backendView('a', 0), backendView('b', 1)];
// Priors: 3.2e-4 s a prompt token, 0.02 s a decode step; heavy at 0.5 s / 5 s.
const heavy = requestInfo('h', 'x'.repeat(7000), { maxTokens: 400 }); // 1750 tokens: 0.56 s; 400 × 0.02 = 8 s
const light = requestInfo('l', 'short', { maxTokens: 10 }); // 10 × 0.02 = 0.2 s

const TRACKING = [
  { name: 'jsq' },
  { name: 'min-min' },
  { name: 'max-capacity' },
  { name: 'workload-aware' },
  { name: 'workload-aware', params: { hold: false } }, // the mixing scorer's own tracker
];
// rl answers through the same trackedHooks and policy picker as jsq (its weights need a host).

for (const spec of TRACKING) {
  test(`${spec.name}${spec.params ? ' (hold: false)' : ''}: a dispatched request's class on its backend`, () => {
    const p = createPolicy({ params: {}, ...spec }, createRng(1));
    for (const [req, cls] of [
      [heavy, 'HH'],
      [light, 'LL'],
    ] as const) {
      const b = chosen(p.pick(req, backends, 0)) ?? backends[0]!;
      p.onDispatch?.(req, b, 0);
      assert.equal(p.requestClass?.(req.id, b.name), cls, `${req.id} on ${b.name}`);
      const other = backends.find((x) => x !== b)!;
      assert.equal(p.requestClass?.(req.id, other.name), undefined, 'not on the other backend');
    }
  });
}

test('policies that do not track workload know no class', () => {
  for (const name of ['round-robin', 'least-connections', 'estimated-wait']) {
    const p = createPolicy({ name, params: {} }, createRng(1));
    const b = chosen(p.pick(heavy, backends, 0))!;
    p.onDispatch?.(heavy, b, 0);
    assert.equal(p.requestClass?.(heavy.id, b.name), undefined, name);
  }
});
