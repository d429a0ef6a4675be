import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKLOG_MODELS, backlogPrompts, type BacklogModel } from './scenario.js';
import { simulateAsIs, simulateLlmlb } from './simulate.js';

const prompts = backlogPrompts(300);

test('llmlb on the quota core solves every task once and never exceeds a target', () => {
  const r = simulateLlmlb(BACKLOG_MODELS, prompts);
  assert.equal(r.solved, prompts.length);
  assert.equal(r.calls, prompts.length, 'one call per prompt');
  assert.equal(r.violations.total, 0);
  for (const m of BACKLOG_MODELS) {
    assert.ok((r.violations.peakConcurrency[m.name] ?? 0) <= m.limits.maxConcurrent, m.name);
  }
  assert.ok(r.peakWorkers > 1 && r.peakWorkers <= 256, `workers follow /advice (peak ${r.peakWorkers})`);
});

test('as-is: a batch lasts as long as its slowest prompt, and fixed fan-out overruns small targets', () => {
  const r = simulateAsIs(BACKLOG_MODELS, prompts);
  assert.equal(r.solved, prompts.length);
  // 300 tasks over 20 workers: 15 each, so a batch of 10 then one of 5; all start at t = 0.
  assert.equal(r.violations.peakConcurrency['model-0'], 20);
  assert.ok(r.violations.concurrency > 0);
  const first = r.records.slice(0, 10);
  const batchEnd = Math.max(...first.map((c) => c.endMs));
  const second = r.records.slice(10, 15);
  assert.ok(
    second.every((c) => c.startMs === batchEnd),
    'the next batch starts only when the slowest returns',
  );
});

test('as-is: a worker timeout throws away the batch in flight and the DAG runs again', () => {
  const slow: BacklogModel[] = [{ ...BACKLOG_MODELS[9]!, minS: 100, maxS: 100 }];
  const r = simulateAsIs(slow, backlogPrompts(40), { workers: 2, batchSize: 10, workerTimeoutS: 150 });
  // Each worker: batch 1 ends at 100 s, batch 2 would end at 200 s > 150 s → killed at 150 s.
  assert.equal(r.wastedCalls, 20);
  assert.equal(r.solved, 40);
  assert.equal(r.drainS, 250, 'second DAG run starts at 150 s and solves the rest by 250 s');
  assert.equal(r.calls, 60);
});
