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
  const bs = [backendView('a', 0, { inFlight: 1 })];
  hold('late', true);
  assert.notEqual(policy.pick(requestInfo('mine'), bs, 100), HOLD.retry, 'a later arrival waits for mine');
  hold('early', true);
  assert.equal(policy.pick(requestInfo('mine'), bs, 100), HOLD.retry, 'an earlier arrival goes first');
  hold('early', false);
  assert.notEqual(policy.pick(requestInfo('mine'), bs, 100), HOLD.retry);
});

test('one queue across routers: a push ends a hold, even one heard after it; a higher ratio must beat two lags', () => {
  const { policy, views } = sharedPolicy(
    ratioPolicy(),
    'shared-state',
    () => {},
    () => 0,
    1000,
  );
  const scheduler = new Scheduler({ policy });
  scheduler.addBackend({ name: 'a', api: 'ollama', models: ['m'], maxConcurrency: Infinity, weight: 1 });
  const bs = [backendView('a', 0, { inFlight: 1 })];
  const old = { ...requestInfo('old'), arrivedAt: 0 };
  const near = { ...requestInfo('near'), arrivedAt: 1000 };
  const mine = { ...requestInfo('mine'), arrivedAt: 5000 };
  const hold = (req: RequestInfo, on: boolean): void => {
    receiveShared(views, scheduler, { req, backend: '', report: undefined, hold: on }, 0);
  };
  // Size 2, at 10 s: old's ratio is 6; near's 5.5, 6.5 two lags (2 s) on; mine's 3.5, 4.5 on.
  hold(old, true);
  assert.notEqual(policy.pick(near, bs, 10_000), HOLD.retry, 'a lead under two lags is not waited for');
  assert.equal(policy.pick(mine, bs, 10_000), HOLD.retry, 'a lead over two lags is');
  // The push of a held request ends its hold (sequenced pushes are heard before the unhold).
  receiveShared(views, scheduler, { req: old, backend: 'a', report: undefined, wasHeld: true }, 0);
  assert.notEqual(policy.pick(mine, bs, 10_000), HOLD.retry, 'pushed: no longer held');
  // Heard in the other order: the push first, then the (stale) hold, which is ignored.
  const late = { ...requestInfo('late'), arrivedAt: 0 };
  receiveShared(views, scheduler, { req: late, backend: 'a', report: undefined, wasHeld: true }, 0);
  hold(late, true);
  assert.notEqual(policy.pick(mine, bs, 10_000), HOLD.retry, 'a hold heard after its push is over');
  assert.equal(views.remoteHeld.size, 0);
  assert.equal(views.pushedBeforeHold.size, 0);
  // Nobody to wait for when every candidate is idle (3 routers each waiting for the next).
  hold(old, true);
  assert.equal(policy.pick(mine, bs, 10_000), HOLD.retry);
  assert.notEqual(policy.pick(mine, [backendView('b', 1)], 10_000), HOLD.retry, 'idle fleet');
});

test('one queue across routers: at a lag small against the size, no margin and the unhold ends a hold', () => {
  // Size 2 s, lag 10 ms: a round trip is 1 % of the size (the rules take 10 %).
  const { policy, views } = sharedPolicy(
    ratioPolicy(),
    'shared-state',
    () => {},
    () => 0,
    10,
  );
  const scheduler = new Scheduler({ policy });
  scheduler.addBackend({ name: 'a', api: 'ollama', models: ['m'], maxConcurrency: Infinity, weight: 1 });
  const bs = [backendView('a', 0, { inFlight: 1 })];
  const old = { ...requestInfo('old'), arrivedAt: -10 };
  const near = { ...requestInfo('near'), arrivedAt: 0 };
  const hold = (req: RequestInfo, on: boolean): void => {
    receiveShared(views, scheduler, { req, backend: '', report: undefined, hold: on }, 0);
  };
  hold(old, true);
  // At 10 s: old's ratio 6.005, near's 6 (6.01 two lags on): a lead under two lags is waited for.
  assert.equal(policy.pick(near, bs, 10_000), HOLD.retry, 'no margin');
  receiveShared(views, scheduler, { req: old, backend: 'a', report: undefined, wasHeld: true }, 0);
  assert.equal(policy.pick(near, bs, 10_000), HOLD.retry, 'the push does not end the hold');
  hold(old, false);
  assert.notEqual(policy.pick(near, bs, 10_000), HOLD.retry, 'the unhold does');
  assert.equal(views.pushedBeforeHold.size, 0);
});
