/**
 * The solver against the real router's admission API (`llmlb serve`'s /schedule, /heartbeat,
 * /complete, /advice) and the emulated models backend: every task answered once, and no model
 * ever had more calls in flight than its quota.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '../log.js';
import { Router } from '../proxy/router.js';
import { backend, settings } from '../../test/helpers.js';
import { HttpAdmission } from './admission.js';
import { OpenAiCaller } from './caller.js';
import { Solver } from './solver.js';
import { TaskStore } from './store.js';
import { BACKENDS, testSql } from './testing.js';
import { countViolations } from '../sim/backlog/meter.js';
import { startModelsBackend } from '../sim/backlog/models-backend.js';
import { BACKLOG_MODELS } from '../sim/backlog/scenario.js';

const MODELS = BACKLOG_MODELS.slice(0, 3);
const QUOTAS = {
  'model-0': { weight: 1, maxConcurrent: 2, tokensPerMinute: 1_000_000, requestsPerMinute: 10_000 },
  'model-1': { weight: 1, maxConcurrent: 3, tokensPerMinute: 1_000_000, requestsPerMinute: 10_000 },
  'model-2': { weight: 1, maxConcurrent: 1, tokensPerMinute: 1_000_000, requestsPerMinute: 10_000 },
};

for (const backendKind of BACKENDS) {
  test(`${backendKind}: solver admitted by the router's /schedule never exceeds a model's concurrency quota`, async (t) => {
    const sql = await testSql(t, backendKind);
    // 1–10 s prompts at 100×: 10–100 ms calls.
    const be = await startModelsBackend({ models: MODELS, timeScale: 100 });
    t.after(() => be.close());
    const r = new Router(
      settings([backend('models', be.url, { models: MODELS.map((m) => m.name) })], {
        quotas: { models: QUOTAS },
        admission: { leaseTtlMs: 30_000, reclaimIntervalMs: 100, tickMs: 100 },
      }),
      silentLogger(),
    );
    const url = await r.listen('127.0.0.1', 0);
    t.after(() => r.close());
    const caller = new OpenAiCaller(be.url); // the quota-aware router: admission from the router, call to the backend
    t.after(() => caller.close());
    const store = new TaskStore(sql, { maxAttempts: 2, baseBackoffMs: 10 });
    await store.add([
      ...Array.from({ length: 30 }, (_, i) => ({ prompt: `free ${i}` })),
      ...Array.from({ length: 10 }, (_, i) => ({ prompt: `pinned ${i}`, model: 'model-2' })),
      // The router refuses this one outright (no quota for the model): dead after its attempts, not retried forever.
      { prompt: 'nowhere', model: 'no-such-model' },
    ]);
    const solver = new Solver({
      store,
      admission: new HttpAdmission(url),
      caller,
      workerId: 'it',
      maxWorkers: 32,
      adviceIntervalMs: 50,
      pollMs: 20,
      drain: true,
    });
    const stats = await solver.run();
    assert.deepEqual(await store.counts(), { queued: 0, running: 0, done: 40, dead: 1 });
    const dead = (await store.all()).find((x) => x.status === 'dead');
    assert.equal(dead?.attempts, 2);
    assert.match(dead?.lastError ?? '', /HTTP 404/);
    assert.equal(stats.solved, 40);
    assert.ok(
      stats.peakWorkers <= 6,
      `workers follow /advice (Σ maxConcurrent = 6), peak ${stats.peakWorkers}`,
    );
    const calls = be.calls();
    assert.equal(calls.length, 40, 'one call per task');
    const v = countViolations(calls, QUOTAS);
    assert.equal(v.concurrency, 0, JSON.stringify(v.peakConcurrency));
    assert.equal(
      calls.filter((c) => c.model === 'model-2').length >= 10,
      true,
      'pinned tasks ran on their model',
    );
    for (const row of await store.all()) {
      if (row.prompt.startsWith('pinned')) assert.match(row.answer ?? '', /^answer\(model-2\)/);
    }
  });
}
