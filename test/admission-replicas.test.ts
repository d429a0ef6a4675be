/**
 * Issue 7: three router replicas on one real Redis (127.0.0.1:6379, REDIS_URL overrides; absent
 * → the test fails), 1000 concurrent /schedule calls → admitted never exceeds any cap; and the
 * proxy gate of two replicas sharing one model's concurrency cap.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { CAPS, burst, dropPrefix, startReplicas, tally } from '../bench/admission-run.js';
import { silentLogger } from '../src/log.js';
import { Router } from '../src/proxy/router.js';
import { backend, engine, post, settings } from './helpers.js';

const URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';
const prefix = `llmlb:test:${randomUUID()}:{q}:`;
after(() => dropPrefix(URL, prefix));

test('3 replicas on one Redis, 1000 concurrent /schedule calls: no cap exceeded, every cap reached', async () => {
  const reps = await startReplicas(3, { url: URL, prefix });
  try {
    const calls = await burst(reps.urls, 1000);
    const t = tally(calls);
    assert.deepEqual(t.violations, []);
    const by = Object.fromEntries(t.models.map((m) => [m.model, m]));
    // Demand exceeds every cap, so a correct store admits exactly up to each (not fewer).
    assert.equal(by.conc!.admitted, CAPS.conc!.maxConcurrent);
    assert.equal(by.rpm!.admitted, CAPS.rpm!.requestsPerMinute);
    assert.ok(by.tpm!.tokens > CAPS.tpm!.tokensPerMinute - 400, `tpm filled to ${by.tpm!.tokens}`);
    // Every replica answered its share (which replica wins the capacity is a matter of timing).
    for (const i of [0, 1, 2]) assert.ok(calls.filter((c) => c.replica === i).length >= 333);
    // The shared view agrees with what clients were told.
    // The shared store as another replica reads it (what its GET /admin/quotas answers).
    const snap = await reps.routers[2]!.admission.store.snapshot();
    for (const m of snap) {
      assert.equal(m.inFlight, by[m.model]!.admitted, m.model);
      assert.equal(m.windowTokens, by[m.model]!.tokens, m.model);
    }
    // Complete everything through other replicas than the one that admitted: counters go to 0.
    const done = await Promise.all(
      calls
        .filter((c) => c.taskId)
        .map((c, i) =>
          fetch(`${reps.urls[(c.replica + 1 + (i % 2)) % 3]}/complete`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ task_id: c.taskId }),
          }).then((r) => r.status),
        ),
    );
    assert.ok(done.every((s) => s === 200));
    const end = await reps.routers[0]!.admission.store.snapshot();
    assert.ok(end.every((m) => m.inFlight === 0));
  } finally {
    await reps.close();
  }
});

test('proxy gate across 2 replicas on one Redis: a model with maxConcurrent 1 is never pushed twice at once', async () => {
  const e = await engine({ models: ['m1'] });
  const gatePrefix = `${prefix}gate:`;
  const s = settings([backend('a', e.url)], {
    state: { redis: URL, keyPrefix: gatePrefix },
    quotas: {
      models: { m1: { weight: 1, maxConcurrent: 1, tokensPerMinute: 1_000_000, requestsPerMinute: 10_000 } },
    },
    admission: { leaseTtlMs: 10_000, reclaimIntervalMs: 1000, tickMs: 100 },
    admin: { token: 't' },
  });
  const routers = [new Router(s, silentLogger()), new Router(s, silentLogger())];
  const urls = await Promise.all(routers.map((r) => r.listen('127.0.0.1', 0)));
  try {
    let maxSeen = 0;
    let polling = true;
    const poll = (async () => {
      while (polling) {
        const n = routers.reduce((a, r) => a + (r.scheduler.backend('a')?.inFlight ?? 0), 0);
        maxSeen = Math.max(maxSeen, n);
        await new Promise((res) => setTimeout(res, 2));
      }
    })();
    const res = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        post(
          `${urls[i % 2]}/api/generate`,
          { model: 'm1', prompt: 'x', stream: false },
          { 'x-llmlb-output-tokens': '8' },
        ),
      ),
    );
    polling = false;
    await poll;
    for (const x of res) {
      assert.equal(x.status, 200);
      await x.arrayBuffer();
    }
    assert.equal(maxSeen, 1);
    const end = Date.now() + 2000;
    let inFlight = -1;
    while (inFlight !== 0 && Date.now() < end) {
      const q = (await (
        await fetch(`${urls[0]}/admin/quotas`, { headers: { authorization: 'Bearer t' } })
      ).json()) as { models: { inFlight: number }[] };
      inFlight = q.models[0]!.inFlight;
      if (inFlight !== 0) await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(inFlight, 0, 'every lease released');
  } finally {
    await Promise.all(routers.map((r) => r.close()));
    await e.close();
  }
});
