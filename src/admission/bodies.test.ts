import { test } from 'node:test';
import assert from 'node:assert/strict';
import { describeIssues, quotaPatchBody, scheduleBody, taskBody } from './bodies.js';

test('schedule body: integer estimated_tokens ≥ 1, optional model, nothing else', () => {
  assert.deepEqual(scheduleBody.parse({ estimated_tokens: 5 }), { estimated_tokens: 5 });
  assert.deepEqual(scheduleBody.parse({ estimated_tokens: 5, model: 'm' }), {
    estimated_tokens: 5,
    model: 'm',
  });
  for (const bad of [
    {},
    { estimated_tokens: 0 },
    { estimated_tokens: 2.5 },
    { estimated_tokens: 5, x: 1 },
    { estimated_tokens: 5, model: '' },
  ]) {
    const r = scheduleBody.safeParse(bad);
    assert.equal(r.success, false, JSON.stringify(bad));
  }
  const r = scheduleBody.safeParse({ estimated_tokens: 'x' });
  assert.match(describeIssues(r.error!), /^estimated_tokens: /);
});

test('task body and quota patch', () => {
  assert.equal(taskBody.safeParse({ task_id: '' }).success, false);
  assert.equal(taskBody.safeParse({ task_id: 'x'.repeat(201) }).success, false);
  assert.equal(quotaPatchBody.safeParse({}).success, false);
  assert.equal(quotaPatchBody.safeParse({ maxConcurrent: 0 }).success, true);
  assert.equal(quotaPatchBody.safeParse({ tokensPerMinute: 0 }).success, false);
});
