import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreAdmission } from './core-admission.js';

const limits = { m: { weight: 1, maxConcurrent: 1, tokensPerMinute: 10_000, requestsPerMinute: 100 } };

test('admits within the cap, then hints a wait scaled to real time; a lease completes once', async () => {
  let real = 1_000;
  const a = new CoreAdmission(limits, { now: () => real, random: () => 0.5, timeScale: 10 });
  const first = await a.schedule(100);
  assert.ok('task_id' in first);
  assert.equal(first.model_backend_id, 'm');
  const second = await a.schedule(100, 'm');
  assert.ok('wait_for_ms' in second, 'cap of 1 reached');
  // The same history on an unscaled clock reading model time: the hint there is 10× the one here.
  const ref = new CoreAdmission(limits, { now: () => real * 10, random: () => 0.5 });
  await ref.schedule(100);
  const refWait = await ref.schedule(100, 'm');
  assert.ok('wait_for_ms' in refWait && refWait.wait_for_ms >= 50);
  assert.equal(second.wait_for_ms, Math.round(refWait.wait_for_ms / 10));
  assert.equal(await a.heartbeat(first.task_id), true);
  assert.equal(await a.complete(first.task_id), true);
  assert.equal(await a.complete(first.task_id), false, 'no double release');
  assert.equal(await a.heartbeat('nope'), false);
  real += 1;
  assert.ok('task_id' in (await a.schedule(100)), 'the slot is free again');
  const adv = await a.advice();
  assert.ok(adv.suggested_parallelism >= 1 && adv.backpressure_score >= 0 && adv.backpressure_score <= 1);
});

test('the one-minute window is a model minute: 100 requests/min at 10× refill after 6 real seconds', async () => {
  let real = 0;
  const a = new CoreAdmission(
    { m: { weight: 1, maxConcurrent: 1000, tokensPerMinute: 1_000_000, requestsPerMinute: 100 } },
    { now: () => real, random: () => 0.5, timeScale: 10 },
  );
  for (let i = 0; i < 100; i++) assert.ok('task_id' in (await a.schedule(1)), `request ${i}`);
  assert.ok('wait_for_ms' in (await a.schedule(1)), '101st in the same model minute waits');
  real += 6_200; // 62 model seconds
  assert.ok('task_id' in (await a.schedule(1)));
});
