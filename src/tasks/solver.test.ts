import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OpenAdmission, parseAdvice, parseSchedule } from './admission.js';
import { OpenAiCaller } from './caller.js';
import { Solver } from './solver.js';
import { TaskStore } from './store.js';
import { BACKENDS, testSql } from './testing.js';
import { startModelsBackend } from '../sim/backlog/models-backend.js';
import { BACKLOG_MODELS } from '../sim/backlog/scenario.js';

test('admission replies are checked: a malformed one is an error, not a NaN sleep', () => {
  assert.deepEqual(parseSchedule({ wait_for_ms: 120 }), { wait_for_ms: 120 });
  assert.deepEqual(parseSchedule({ model_backend_id: 'm', task_id: 't' }), {
    model_backend_id: 'm',
    task_id: 't',
  });
  assert.throws(() => parseSchedule({ wait_for_ms: 'soon' }), /unexpected \/schedule reply/);
  assert.throws(() => parseSchedule({ wait_for_ms: -1 }), /unexpected/);
  assert.throws(() => parseAdvice({ backpressure_score: 0.1 }), /unexpected \/advice reply/);
});

for (const backend of BACKENDS) {
  test(`${backend}: the solver drains the backlog one prompt per call, retries failures and dead-letters poison`, async (t) => {
    const sql = await testSql(t, backend);
    // model-0 takes 1–3 s; at 50× that is 20–60 ms a prompt.
    const be = await startModelsBackend({ models: BACKLOG_MODELS, timeScale: 50, failMarker: 'POISON' });
    t.after(() => be.close());
    const caller = new OpenAiCaller(be.url);
    t.after(() => caller.close());
    const store = new TaskStore(sql, { maxAttempts: 3, baseBackoffMs: 20, maxBackoffMs: 100 });
    const prompts = Array.from({ length: 40 }, (_, i) => `prompt ${i}`);
    await store.add([...prompts.map((p) => ({ prompt: p })), { prompt: 'POISON pill' }]);
    const events: string[] = [];
    const solver = new Solver({
      store,
      admission: new OpenAdmission('model-0', 3),
      caller,
      workerId: 'test',
      maxWorkers: 8,
      adviceIntervalMs: 50,
      pollMs: 20,
      drain: true,
      onEvent: (e) => events.push(e.type),
    });
    const stats = await solver.run();
    assert.deepEqual(await store.counts(), { queued: 0, running: 0, done: 40, dead: 1 });
    assert.equal(stats.solved, 40);
    assert.equal(stats.failed, 3, 'the poison prompt was tried maxAttempts times');
    assert.equal(stats.peakWorkers, 3, '/advice said 3, below --max-workers 8');
    assert.equal(Math.max(...be.calls().map((_, i, a) => concurrentAt(a, a[i]!.startMs))), 3);
    const rows = await store.all();
    for (const r of rows.filter((x) => x.status === 'done'))
      assert.match(r.answer ?? '', /^answer\(model-0\): /);
    const dead = rows.find((x) => x.status === 'dead');
    assert.equal(dead?.attempts, 3);
    assert.match(dead?.lastError ?? '', /HTTP 500/);
    for (const p of prompts) assert.equal(be.callsPerPrompt().get(p), 1, `${p} called once`);
  });
}

function concurrentAt(calls: readonly { startMs: number; endMs: number }[], t: number): number {
  return calls.filter((c) => c.startMs <= t && c.endMs > t).length;
}
