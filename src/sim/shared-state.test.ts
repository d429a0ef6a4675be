import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backendView, requestInfo } from '../core/testing.js';
import { HOLD, type Policy, type RequestInfo } from '../core/types.js';
import { Scheduler } from '../core/scheduler.js';
import { receiveShared, sharedPolicy } from './shared-state.js';

/** A policy that always picks the first candidate and orders held requests by response ratio. */
function ratioPolicy(): Policy {
  return {
    name: 'first',
    traits: { holds: false, readsMetrics: false },
    queueOrder: { kind: 'response-ratio', size: () => 2, epoch: () => 0 },
    pick: (_req, c) => c[0]!,
  } as Policy;
}

test('one queue across routers: an equal-ratio request held elsewhere goes first only if it arrived first', () => {
  // A burst at one instant: equal arrivedAt and size, so equal response ratios. One router's queue
  // takes them in arrival order; across routers the order must be the same (issue #31).
  const order = new Map<string, number>([
    ['early', 1],
    ['mine', 2],
    ['late', 3],
  ]);
  const { policy, views } = sharedPolicy(
    ratioPolicy(),
    'shared-state',
    () => {},
    (r: RequestInfo) => order.get(r.id)!,
  );
  const scheduler = new Scheduler({ policy });
  scheduler.addBackend({ name: 'a', api: 'ollama', models: ['m'], maxConcurrency: Infinity, weight: 1 });
  const hold = (id: string, on: boolean): void => {
    receiveShared(views, scheduler, { req: requestInfo(id), backend: '', report: undefined, hold: on }, 0);
  };
  const bs = [backendView('a', 0)];
  hold('late', true);
  assert.notEqual(policy.pick(requestInfo('mine'), bs, 100), HOLD.retry, 'a later arrival waits for mine');
  hold('early', true);
  assert.equal(policy.pick(requestInfo('mine'), bs, 100), HOLD.retry, 'an earlier arrival goes first');
  hold('early', false);
  assert.notEqual(policy.pick(requestInfo('mine'), bs, 100), HOLD.retry);
});
