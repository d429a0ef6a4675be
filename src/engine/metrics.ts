/**
 * vLLM-style Prometheus text for the emulated engine, written by hand (it is a dozen lines; a
 * registry would be more code). One engine serves all its models from one batch, so every
 * model_name series reports the whole engine — as a shared GPU would.
 */
import type { EngineStats } from './types.js';

interface Metric {
  readonly name: string;
  readonly type: 'gauge' | 'counter';
  readonly help: string;
  readonly value: (s: EngineStats, blockSize: number) => number;
}

const METRICS: readonly Metric[] = [
  {
    name: 'vllm:num_requests_running',
    type: 'gauge',
    help: 'Number of requests in model execution batches.',
    value: (s) => s.running,
  },
  {
    name: 'vllm:num_requests_waiting',
    type: 'gauge',
    help: 'Number of requests waiting to be processed.',
    value: (s) => s.waiting,
  },
  {
    name: 'vllm:kv_cache_usage_perc',
    type: 'gauge',
    help: 'KV-cache usage. 1 means 100 percent usage.',
    value: (s) => s.kvUsage,
  },
  // The pre-v1 name of the same gauge, for scrapers written against older vLLM.
  {
    name: 'vllm:gpu_cache_usage_perc',
    type: 'gauge',
    help: 'GPU KV-cache usage. 1 means 100 percent usage.',
    value: (s) => s.kvUsage,
  },
  // vLLM counts the prefix cache in tokens; the engine model counts blocks.
  {
    name: 'vllm:prefix_cache_queries_total',
    type: 'counter',
    help: 'Prefix cache queries, in terms of number of queried tokens.',
    value: (s, b) => s.prefixCacheQueries * b,
  },
  {
    name: 'vllm:prefix_cache_hits_total',
    type: 'counter',
    help: 'Prefix cache hits, in terms of number of cached tokens.',
    value: (s, b) => s.prefixCacheHits * b,
  },
  {
    name: 'vllm:prompt_tokens_total',
    type: 'counter',
    help: 'Number of prefill tokens processed.',
    value: (s) => s.promptTokens,
  },
  {
    name: 'vllm:generation_tokens_total',
    type: 'counter',
    help: 'Number of generation tokens processed.',
    value: (s) => s.generatedTokens,
  },
  {
    name: 'vllm:request_success_total',
    type: 'counter',
    help: 'Count of successfully processed requests.',
    value: (s) => s.completed,
  },
];

const escapeLabel = (v: string): string =>
  v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

export function prometheusText(models: readonly string[], stats: EngineStats, blockSize: number): string {
  const labels = models.map((m) => `{model_name="${escapeLabel(m)}"}`);
  let out = '';
  for (const m of METRICS) {
    out += `# HELP ${m.name} ${m.help}\n# TYPE ${m.name} ${m.type}\n`;
    const v = m.value(stats, blockSize);
    for (const l of labels) out += `${m.name}${l} ${v}\n`;
  }
  return out;
}
