import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseEngineMetrics, parseOllamaPs } from './engine-metrics.js';

test('vLLM and SGLang pages parse; other pages do not', () => {
  const vllm = [
    '# HELP vllm:num_requests_running x',
    'vllm:num_requests_running{model_name="a"} 3',
    'vllm:num_requests_running{model_name="b"} 1',
    'vllm:num_requests_waiting{model_name="a"} 7',
    'vllm:gpu_cache_usage_perc{model_name="a"} 0.42',
  ].join('\n');
  assert.deepEqual(parseEngineMetrics(vllm, 5), { running: 3, waiting: 7, kvUsage: 0.42, at: 5 });
  const sglang =
    'sglang:num_running_reqs{tp_rank="0"} 2\nsglang:num_queue_reqs{tp_rank="0"} 0\nsglang:token_usage 0.1\n';
  assert.deepEqual(parseEngineMetrics(sglang, 1), { running: 2, waiting: 0, kvUsage: 0.1, at: 1 });
  assert.equal(parseEngineMetrics('process_cpu_seconds_total 12\n', 1), undefined);
  assert.equal(parseEngineMetrics('', 1), undefined);
});

test('Ollama /api/ps: loaded models; batch state only from the emulated engine', () => {
  const plain = parseOllamaPs({ models: [{ name: 'llama3:latest', model: 'llama3:latest' }] }, 5);
  assert.deepEqual([...plain!.loadedModels], ['llama3:latest']);
  assert.equal(plain!.metrics, undefined);
  const emulated = parseOllamaPs(
    { models: [{ name: 'm' }], llmlb: { running: 2, waiting: 3, slots: 4, kvUsage: 0.25 } },
    7,
  );
  assert.deepEqual(emulated!.metrics, { running: 2, waiting: 3, kvUsage: 0.25, at: 7 });
  assert.equal(parseOllamaPs({ error: 'x' }, 0), undefined);
  assert.equal(parseOllamaPs(null, 0), undefined);
});
