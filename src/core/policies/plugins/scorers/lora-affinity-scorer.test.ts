import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, engineReport, makePlugin, requestInfo, scoresOf } from '../../../testing.js';
import type { EngineMetrics, LoraMetrics } from '../../../types.js';

const adapters = new Set(['a', 'b', 'c', 'd']);
const lora = (running: string[], waiting: string[], maxLora = 2): EngineMetrics => ({
  running: running.length,
  waiting: waiting.length,
  kvUsage: 0,
  at: 0,
  lora: { maxLora, running, waiting } satisfies LoraMetrics,
});

test('lora-affinity-scorer: from vllm:lora_requests_info — running 1, free slot 0.8, queued 0.6, full 0', () => {
  const s = makePlugin('scorer', 'lora-affinity-scorer');
  const bs = [
    backendView('running', 0, { adapters, metrics: lora(['a'], []) }),
    backendView('free', 1, { adapters, metrics: lora(['b'], []) }),
    backendView('queued', 2, { adapters, metrics: lora(['b', 'c'], ['a']) }),
    backendView('full', 3, { adapters, metrics: lora(['b', 'c'], ['d']) }),
  ];
  assert.deepEqual(scoresOf(s, requestInfo('r', '', { model: 'a' }), bs), [1, 0.8, 0.6, 0]);
});

test('lora-affinity-scorer: a base-model request scores 1 everywhere', () => {
  const s = makePlugin('scorer', 'lora-affinity-scorer');
  const bs = [backendView('x', 0, { adapters, metrics: lora(['b', 'c'], ['d']) }), backendView('y', 1)];
  assert.deepEqual(scoresOf(s, requestInfo('r'), bs), [1, 1]);
});

test('lora-affinity-scorer: without engine metrics, learns what is loaded from its own routing', () => {
  const s = makePlugin('scorer', 'lora-affinity-scorer', { maxLora: 2 });
  const x = backendView('x', 0, { adapters });
  const y = backendView('y', 1, { adapters });
  const req = (id: string, model: string) => requestInfo(id, '', { model });
  // Nothing sent yet: both have a free slot.
  assert.deepEqual(scoresOf(s, req('1', 'a'), [x, y]), [0.8, 0.8]);
  s.onDispatch!(req('1', 'a'), x, 0);
  s.onDispatch!(req('2', 'b'), x, 0);
  assert.deepEqual(scoresOf(s, req('3', 'a'), [x, y]), [1, 0.8], 'a in flight on x');
  assert.deepEqual(scoresOf(s, req('3', 'c'), [x, y]), [0, 0.8], 'x: both slots busy');
  s.onComplete!(req('1', 'a'), x, engineReport(0, 10, 10, 1), 1);
  s.onComplete!(req('2', 'b'), x, engineReport(0, 10, 10, 1), 1);
  assert.deepEqual(scoresOf(s, req('4', 'a'), [x, y]), [1, 0.8], 'a idle but among the last 2 sent: loaded');
  s.onDispatch!(req('5', 'c'), x, 2);
  assert.deepEqual(
    scoresOf(s, req('6', 'a'), [x, y]),
    [0.8, 0.8],
    'a evicted by c (LRU); a slot is free again',
  );
});

test('lora-affinity-scorer: refuses unknown parameters', () => {
  assert.throws(() => makePlugin('scorer', 'lora-affinity-scorer', { slots: 2 }));
});
