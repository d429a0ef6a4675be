import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AdviceWindow } from './advice.js';

test('no traffic: score 0 and all headroom suggested', () => {
  const a = new AdviceWindow();
  assert.deepEqual(a.compute(0, 3, 40), { backpressure_score: 0, suggested_parallelism: 40 });
});

test('all admitted: score 0; all long waits: score 1, suggestion holds at in-flight (≥ 4)', () => {
  const a = new AdviceWindow();
  for (let i = 0; i < 100; i++) a.record(i, null);
  assert.equal(a.compute(100, 10, 40).backpressure_score, 0);
  const b = new AdviceWindow();
  for (let i = 0; i < 100; i++) b.record(i, 5000);
  assert.deepEqual(b.compute(100, 10, 40), { backpressure_score: 1, suggested_parallelism: 10 });
  assert.deepEqual(b.compute(100, 0, 40), { backpressure_score: 1, suggested_parallelism: 4 });
});

test('mixed: half refused with short waits lands in between; old samples age out', () => {
  const a = new AdviceWindow();
  for (let i = 0; i < 100; i++) a.record(i, i % 2 ? 200 : null);
  const r = a.compute(100, 0, 20);
  assert.ok(r.backpressure_score > 0.25 && r.backpressure_score < 0.5, String(r.backpressure_score));
  assert.ok(r.suggested_parallelism > 4 && r.suggested_parallelism < 20);
  assert.equal(a.compute(61_000, 0, 20).backpressure_score, 0);
});

test('never suggests more than capacity, nor NaN with zero capacity', () => {
  const a = new AdviceWindow();
  a.record(0, 100);
  const r = a.compute(1, 0, 0);
  assert.deepEqual(r, { backpressure_score: r.backpressure_score, suggested_parallelism: 0 });
  assert.ok(Number.isFinite(r.backpressure_score));
});
