/**
 * Issue 7: three router replicas on one real Redis (127.0.0.1:6379, REDIS_URL overrides; absent
 * → the test fails), 1000 concurrent /schedule calls → admitted never exceeds any cap.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { CAPS, burst, dropPrefix, startReplicas, tally } from '../bench/admission-run.js';

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
    const snap = (await (await fetch(`${reps.urls[2]}/admin/quotas`)).json()) as {
      models: { model: string; inFlight: number; windowTokens: number }[];
    };
    for (const m of snap.models) {
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
    const end = (await (await fetch(`${reps.urls[0]}/admin/quotas`)).json()) as {
      models: { inFlight: number }[];
    };
    assert.ok(end.models.every((m) => m.inFlight === 0));
  } finally {
    await reps.close();
  }
});
