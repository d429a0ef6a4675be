import { test } from 'node:test';
import assert from 'node:assert/strict';
import { llamaPropsOf, parseEngineMetrics, parseLlamaProps, parseOllamaPs } from './engine-metrics.js';

test('vLLM and SGLang pages parse; other pages do not', () => {
  const vllm = [
    '# HELP vllm:num_requests_running x',
    'vllm:num_requests_running{model_name="a"} 3',
    'vllm:num_requests_running{model_name="b"} 1',
    'vllm:num_requests_waiting{model_name="a"} 7',
    'vllm:gpu_cache_usage_perc{model_name="a"} 0.42',
  ].join('\n');
  // One series per model: the engine runs 3 + 1.
  assert.deepEqual(parseEngineMetrics(vllm, 5), { running: 4, waiting: 7, kvUsage: 0.42, at: 5 });
  const sglang =
    'sglang:num_running_reqs{tp_rank="0"} 2\nsglang:num_queue_reqs{tp_rank="0"} 0\nsglang:token_usage 0.1\n';
  assert.deepEqual(parseEngineMetrics(sglang, 1), { running: 2, waiting: 0, kvUsage: 0.1, at: 1 });
  // llama-server --metrics: slots busy, requests deferred (waiting for a slot), KV cells used.
  const llamacpp = [
    '# HELP llamacpp:requests_processing Number of requests processing.',
    '# TYPE llamacpp:requests_processing gauge',
    'llamacpp:prompt_tokens_total 6886',
    'llamacpp:requests_processing 2',
    'llamacpp:requests_deferred 5',
    'llamacpp:kv_cache_usage_ratio 0.25',
  ].join('\n');
  assert.deepEqual(parseEngineMetrics(llamacpp, 3), { running: 2, waiting: 5, kvUsage: 0.25, at: 3 });
  assert.equal(parseEngineMetrics('process_cpu_seconds_total 12\n', 1), undefined);
  assert.equal(parseEngineMetrics('', 1), undefined);
});

test("vLLM's prefix-cache counters come along (tokens, summed over models), only when both are there", () => {
  const page = [
    'vllm:num_requests_running{model_name="a"} 1',
    'vllm:num_requests_waiting{model_name="a"} 0',
    'vllm:prefix_cache_queries_total{model_name="a"} 12000',
    'vllm:prefix_cache_queries_total{model_name="b"} 3000',
    'vllm:prefix_cache_hits_total{model_name="a"} 9000',
    'vllm:prefix_cache_hits_total{model_name="b"} 0',
  ].join('\n');
  assert.deepEqual(parseEngineMetrics(page, 2), {
    running: 1,
    waiting: 0,
    kvUsage: 0,
    at: 2,
    prefixCacheQueries: 15000,
    prefixCacheHits: 9000,
  });
  // Queries without hits (or the reverse) say nothing about the hit share.
  const half = parseEngineMetrics(page.split('\n').slice(0, 4).join('\n'), 2);
  assert.equal(half?.prefixCacheQueries, undefined);
  assert.equal(half?.prefixCacheHits, undefined);
});

test('per-model series add up; series of one model that differ in other labels do not', () => {
  const page = [
    'vllm:num_requests_running{model_name="a",tp_rank="0"} 2',
    'vllm:num_requests_running{model_name="a",tp_rank="1"} 2',
    'vllm:num_requests_running{engine="0",model_name="b"} 5',
    'vllm:num_requests_waiting{model_name="a"} 1',
    'vllm:num_requests_waiting{model_name="b \\"quoted\\" name"} 4',
    'vllm:num_requests_waiting{model_name="c"} 0',
    'vllm:kv_cache_usage_perc{model_name="a"} 0.3',
    'vllm:kv_cache_usage_perc{model_name="b"} 0.3',
  ].join('\n');
  assert.deepEqual(parseEngineMetrics(page, 0), { running: 7, waiting: 5, kvUsage: 0.3, at: 0 });
  // Unlabelled series (SGLang without model_name) are one engine-wide series.
  assert.deepEqual(parseEngineMetrics('sglang:num_running_reqs 3\nsglang:num_queue_reqs 2\n', 0), {
    running: 3,
    waiting: 2,
    kvUsage: 0,
    at: 0,
  });
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

test("vLLM's vllm:lora_requests_info: the latest series' running and waiting adapters and max_lora", () => {
  const page = [
    'vllm:num_requests_running{model_name="base"} 3',
    'vllm:num_requests_waiting{model_name="base"} 1',
    '# TYPE vllm:lora_requests_info gauge',
    'vllm:lora_requests_info{max_lora="4",running_lora_adapters="old",waiting_lora_adapters=""} 1700000000.5',
    'vllm:lora_requests_info{max_lora="4",running_lora_adapters="a,b",waiting_lora_adapters="c"} 1700000009.25',
    'vllm:lora_requests_info{max_lora="4",running_lora_adapters="older",waiting_lora_adapters=""} 1699999999',
  ].join('\n');
  assert.deepEqual(parseEngineMetrics(page, 7)?.lora, { maxLora: 4, running: ['a', 'b'], waiting: ['c'] });
  const idle =
    'vllm:num_requests_running 0\nvllm:lora_requests_info{running_lora_adapters="",waiting_lora_adapters="",max_lora="2"} 1\n';
  assert.deepEqual(parseEngineMetrics(idle, 1)?.lora, { maxLora: 2, running: [], waiting: [] });
  // No max_lora: not a usable series.
  const bad = 'vllm:num_requests_running 0\nvllm:lora_requests_info{running_lora_adapters="a"} 1\n';
  assert.equal(parseEngineMetrics(bad, 1)?.lora, undefined);
});

test("vLLM's cache_config_info gives the cache's size (block_size × num_gpu_blocks); llama.cpp's /props its slots", () => {
  const page = [
    'vllm:num_requests_running{model_name="a"} 1',
    'vllm:num_requests_waiting{model_name="a"} 0',
    'vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",num_gpu_blocks="2500"} 1.0',
  ].join('\n');
  assert.deepEqual(parseEngineMetrics(page, 0)?.cache, { tokens: 40_000 });
  const noBlocks = page.replace('num_gpu_blocks="2500"', 'num_gpu_blocks="None"');
  assert.equal(parseEngineMetrics(noBlocks, 0)?.cache, undefined, 'before the profile run vLLM says None');
  assert.deepEqual(parseLlamaProps({ total_slots: 4, default_generation_settings: { n_ctx: 8192 } }), {
    tokens: 32_768,
    slots: 4,
  });
  assert.equal(parseLlamaProps({ total_slots: 4 }), undefined);
  assert.equal(parseLlamaProps({ default_generation_settings: { n_ctx: 8192 } }), undefined);
  assert.equal(parseLlamaProps([]), undefined);
  // The fleet reads the page's text: not JSON, or not llama.cpp's, is null (not asked again).
  assert.deepEqual(llamaPropsOf('{"total_slots":2,"default_generation_settings":{"n_ctx":100}}'), {
    tokens: 200,
    slots: 2,
  });
  assert.equal(llamaPropsOf('<html>'), null);
  assert.equal(llamaPropsOf('{}'), null);
});
