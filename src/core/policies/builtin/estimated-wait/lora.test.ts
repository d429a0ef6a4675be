// The default policy with LoRA adapters (issue #35): a request for an adapter prefers where it is
// loaded, pays the load elsewhere, and is not held for room by the waiting counts of LoRA engines.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Scheduler } from '../../../scheduler.js';
import { createPolicy } from '../../index.js';
import { engineReport } from '../../../testing.js';
import type { Decision, RequestInfo } from '../../../types.js';

const req = (id: string, model: string, at: number): RequestInfo => ({
  id,
  model,
  api: 'openai',
  arrivedAt: at,
  promptText: `${id}:`.padEnd(400, 'x'),
});

function fleet(params: Record<string, unknown> = {}): Scheduler {
  const s = new Scheduler({ policy: createPolicy({ name: 'estimated-wait', params }, () => 0.5) });
  for (const name of ['x', 'y'])
    s.addBackend({
      name,
      api: 'openai',
      models: ['base', 'a', 'b', 'c'],
      adapters: ['a', 'b', 'c'],
      maxConcurrency: Infinity,
      weight: 1,
    });
  return s;
}

const backendOf = (ds: readonly Decision[]): string | undefined =>
  ds.find((d) => d.type === 'dispatch')?.type === 'dispatch'
    ? (ds.find((d) => d.type === 'dispatch') as Extract<Decision, { type: 'dispatch' }>).backend
    : undefined;

/** Sends `n` requests for `model` one after another (each done before the next), returning where each went. */
function sequence(s: Scheduler, model: string, n: number, t0: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const at = t0 + i * 1000;
    const r = req(`${model}${t0}-${i}`, model, at);
    const b = backendOf(s.submit(r, at));
    assert.ok(b, 'dispatched at once');
    out.push(b);
    s.complete(r.id, engineReport(at, 100, 100, 10), at + 200);
  }
  return out;
}

test('estimated-wait + LoRA: requests for one adapter stay where it is loaded', () => {
  const where = sequence(fleet(), 'a', 6, 0);
  assert.equal(new Set(where).size, 1, `all on one backend: ${where.join(',')}`);
});

test('estimated-wait lora=false: adapters are costed as any model (ties spread them)', () => {
  const where = sequence(fleet({ lora: false }), 'a', 6, 0);
  assert.equal(new Set(where).size, 2, `spread: ${where.join(',')}`);
});

test('estimated-wait + LoRA: a base-model request is costed as before', () => {
  const a = sequence(fleet(), 'base', 6, 0);
  const b = sequence(fleet({ lora: false }), 'base', 6, 0);
  assert.deepEqual(a, b);
});

test('estimated-wait + LoRA: an adapter request is not held on a LoRA engine whose queue is adapter waits', () => {
  const s = fleet();
  // Both engines report requests waiting inside (for adapter slots): a base-model request is held
  // for room (late binding), an adapter request loaded nowhere still goes.
  for (const name of ['x', 'y'])
    s.setMetrics(name, {
      running: 2,
      waiting: 3,
      kvUsage: 0.1,
      at: 0,
      lora: { maxLora: 4, running: ['b'], waiting: ['c'] },
    });
  assert.equal(backendOf(s.submit(req('base-1', 'base', 0), 0)), undefined);
  assert.ok(backendOf(s.submit(req('a-1', 'a', 0), 0)));
  // Equal load, but the engines say b runs on x only: a request for b goes there, for either order.
  for (const [name, running] of [
    ['x', ['b']],
    ['y', ['c']],
  ] as const)
    s.setMetrics(name, {
      running: 2,
      waiting: 3,
      kvUsage: 0.1,
      at: 1,
      lora: { maxLora: 4, running, waiting: [] },
    });
  assert.equal(backendOf(s.submit(req('b-1', 'b', 1), 1)), 'x');
  assert.equal(backendOf(s.submit(req('c-1', 'c', 1), 1)), 'y');
});
