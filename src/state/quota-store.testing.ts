/**
 * One behavioural suite for every QuotaStore: the memory and Redis stores must behave the same.
 * The clock is a variable the tests move; randomness is fixed (no jitter) so hints are exact.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  LeaseNotFoundError,
  QuotaInputError,
  TooLargeError,
  UnknownModelError,
  type AdmitResult,
  type QuotaLimits,
  type QuotaOptions,
} from '../core/quota/index.js';
import type { QuotaStore, StoreEnv } from './quota-store.js';

export type StoreFactory = (
  limits: Record<string, QuotaLimits>,
  options: Partial<QuotaOptions>,
  env: Partial<StoreEnv>,
) => Promise<QuotaStore>;

const T0 = 1_763_900_000_000;
const L = (over: Partial<QuotaLimits> = {}): QuotaLimits => ({
  weight: 1,
  maxConcurrent: 4,
  tokensPerMinute: 100_000,
  requestsPerMinute: 1000,
  ...over,
});

function taskId(r: AdmitResult): string {
  assert.equal(r.kind, 'admitted', JSON.stringify(r));
  return r.kind === 'admitted' ? r.lease.id : '';
}

export function quotaStoreSuite(name: string, make: StoreFactory): void {
  const clock = { t: T0 };
  const env: Partial<StoreEnv> = { now: () => clock.t, random: () => 0.5 };
  async function withStore(
    limits: Record<string, QuotaLimits>,
    opts: Partial<QuotaOptions>,
    fn: (s: QuotaStore) => Promise<void>,
  ): Promise<void> {
    clock.t = T0;
    const s = await make(limits, { tickMs: 100, leaseTtlMs: 1000, ...opts }, env);
    try {
      await fn(s);
    } finally {
      await s.close();
    }
  }

  test(`${name}: admits up to the concurrency cap, then waits; complete frees the slot`, () =>
    withStore({ m: L({ maxConcurrent: 2 }) }, {}, async (s) => {
      const a = taskId(await s.acquire({ tokens: 10, model: 'm' }));
      taskId(await s.acquire({ tokens: 10, model: 'm' }));
      const w = await s.acquire({ tokens: 10, model: 'm' });
      assert.equal(w.kind, 'wait');
      assert.ok(w.kind === 'wait' && w.reason === 'concurrency' && w.waitForMs >= 50);
      assert.equal((await s.complete(a)).model, 'm');
      taskId(await s.acquire({ tokens: 10, model: 'm' }));
      assert.equal((await s.snapshot())[0]!.inFlight, 2);
    }));

  test(`${name}: completing twice or an unknown id → LeaseNotFoundError, no double release`, () =>
    withStore({ m: L() }, {}, async (s) => {
      const a = taskId(await s.acquire({ tokens: 10, model: 'm' }));
      taskId(await s.acquire({ tokens: 10, model: 'm' }));
      await s.complete(a);
      await assert.rejects(s.complete(a), LeaseNotFoundError);
      await assert.rejects(s.complete('tsk_nope'), LeaseNotFoundError);
      await assert.rejects(s.heartbeat('tsk_nope'), LeaseNotFoundError);
      assert.equal((await s.snapshot())[0]!.inFlight, 1);
    }));

  test(`${name}: tokens per minute: refused when spent; capacity returns when the tick leaves the minute`, () =>
    withStore({ m: L({ tokensPerMinute: 1000 }) }, {}, async (s) => {
      taskId(await s.acquire({ tokens: 700, model: 'm' }));
      clock.t += 1000;
      const w = await s.acquire({ tokens: 400, model: 'm' });
      assert.ok(w.kind === 'wait' && w.reason === 'tokens');
      assert.equal(w.kind === 'wait' && w.waitForMs, 59_100);
      clock.t += 59_099;
      assert.equal((await s.acquire({ tokens: 400, model: 'm' })).kind, 'wait');
      clock.t += 1;
      taskId(await s.acquire({ tokens: 400, model: 'm' }));
    }));

  test(`${name}: heartbeat keeps a lease; an expired one is reclaimed with a refund and can't be completed`, () =>
    withStore({ m: L({ maxConcurrent: 1, tokensPerMinute: 1000 }) }, {}, async (s) => {
      const a = taskId(await s.acquire({ tokens: 800, model: 'm' }));
      clock.t += 900;
      assert.equal((await s.heartbeat(a)).expiresAt, clock.t + 1000);
      clock.t += 500;
      assert.deepEqual(await s.reclaimExpired(), []);
      clock.t += 500;
      const got = await s.reclaimExpired();
      assert.deepEqual(
        got.map((l) => l.id),
        [a],
      );
      const snap = (await s.snapshot())[0]!;
      assert.deepEqual([snap.inFlight, snap.windowTokens, snap.windowRequests], [0, 0, 1]);
      await assert.rejects(s.complete(a), LeaseNotFoundError);
      assert.deepEqual(await s.reclaimExpired(), [], 'reclaimed once');
      taskId(await s.acquire({ tokens: 800, model: 'm' }));
    }));

  test(`${name}: bad input, unknown model and impossible sizes throw and change nothing`, () =>
    withStore({ m: L({ tokensPerMinute: 1000 }) }, {}, async (s) => {
      taskId(await s.acquire({ tokens: 10, model: 'm' }));
      const before = JSON.stringify(await s.snapshot());
      await assert.rejects(s.acquire({ tokens: 0, model: 'm' }), QuotaInputError);
      await assert.rejects(s.acquire({ tokens: 2.5, model: 'm' }), QuotaInputError);
      await assert.rejects(s.acquire({ tokens: 10, model: 'x' }), UnknownModelError);
      await assert.rejects(s.acquire({ tokens: 1001, model: 'm' }), TooLargeError);
      await assert.rejects(s.setLimits('m', { maxConcurrent: 1.5 }), QuotaInputError);
      await assert.rejects(s.setLimits('x', { maxConcurrent: 1 }), UnknownModelError);
      assert.equal(JSON.stringify(await s.snapshot()), before);
    }));

  test(`${name}: limits change at run time and by reload, keeping in-flight accounting`, () =>
    withStore({ m: L({ maxConcurrent: 3 }) }, {}, async (s) => {
      const ids = [];
      for (let i = 0; i < 3; i++) ids.push(taskId(await s.acquire({ tokens: 1, model: 'm' })));
      assert.equal((await s.setLimits('m', { maxConcurrent: 2 })).maxConcurrent, 2);
      assert.equal((await s.acquire({ tokens: 1, model: 'm' })).kind, 'wait');
      await s.complete(ids[0]!);
      await s.complete(ids[1]!);
      taskId(await s.acquire({ tokens: 1, model: 'm' }));
      await s.configure({ n: L() });
      const snap = await s.snapshot();
      assert.deepEqual(
        snap.map((x) => [x.model, x.retired, x.inFlight]),
        [
          ['m', true, 2],
          ['n', false, 0],
        ],
      );
      await assert.rejects(s.acquire({ tokens: 1, model: 'm' }), UnknownModelError);
    }));

  test(`${name}: model omitted → a model with capacity is picked`, () =>
    withStore({ a: L({ maxConcurrent: 1 }), b: L({ maxConcurrent: 1 }) }, {}, async (s) => {
      const r1 = await s.acquire({ tokens: 5 });
      const r2 = await s.acquire({ tokens: 5 });
      const models = [r1, r2].map((r) => (r.kind === 'admitted' ? r.lease.model : '-')).sort();
      assert.deepEqual(models, ['a', 'b']);
      assert.equal((await s.acquire({ tokens: 5 })).kind, 'wait');
    }));

  test(`${name}: 300 concurrent acquires never exceed any cap; counters return to 0`, () =>
    withStore({ m: L({ maxConcurrent: 7, requestsPerMinute: 50, tokensPerMinute: 5000 }) }, {}, async (s) => {
      const rs = await Promise.all(
        Array.from({ length: 300 }, (_, i) => s.acquire({ tokens: 10 + (i % 90), model: 'm' })),
      );
      const admitted = rs.filter((r) => r.kind === 'admitted');
      assert.equal(admitted.length, 7);
      const snap = (await s.snapshot())[0]!;
      assert.equal(snap.inFlight, 7);
      await Promise.all(admitted.map((r) => s.complete(r.kind === 'admitted' ? r.lease.id : '')));
      const rs2 = await Promise.all(
        Array.from({ length: 300 }, () => s.acquire({ tokens: 100, model: 'm' })),
      );
      const more = rs2.filter((r) => r.kind === 'admitted');
      const tokens = [...admitted, ...more].reduce(
        (a, r) => a + (r.kind === 'admitted' ? r.lease.tokens : 0),
        0,
      );
      assert.ok(tokens <= 5000 && admitted.length + more.length <= 50);
      await Promise.all(more.map((r) => s.complete(r.kind === 'admitted' ? r.lease.id : '')));
      clock.t += 61_000;
      const end = (await s.snapshot())[0]!;
      assert.deepEqual([end.inFlight, end.windowTokens, end.windowRequests], [0, 0, 0]);
    }));

  test(`${name}: advice has the quota-aware router's shape and reacts to refusals`, () =>
    withStore({ m: L({ maxConcurrent: 1 }) }, {}, async (s) => {
      assert.deepEqual(await s.advice(), { backpressure_score: 0, suggested_parallelism: 1 });
      taskId(await s.acquire({ tokens: 1, model: 'm' }));
      for (let i = 0; i < 10; i++) await s.acquire({ tokens: 1, model: 'm' });
      const a = await s.advice();
      assert.ok(a.backpressure_score > 0.4 && a.suggested_parallelism === 1);
    }));
}
