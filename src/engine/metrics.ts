/**
 * vLLM-style Prometheus text for the emulated engine, written by hand (it is a dozen lines; a
 * registry would be more code). vLLM exposes one series per model_name; a scraper adds them up for
 * the engine's totals. So each request counts only under its own model: running, waiting and the
 * counters are per model. KV usage is the share of the one pool all models use, the same value
 * under every label (a scraper takes the largest).
 */

import type { LoraInfo } from './types.js';

/** What one model has on the engine now and has done so far. */
export interface ModelCounts {
  running: number;
  waiting: number;
  /** Finished sequences. */
  completed: number;
  promptTokens: number;
  generatedTokens: number;
  /** Prompt tokens looked up in the prefix cache, and those found there (vLLM counts tokens). */
  prefixQueries: number;
  prefixHits: number;
}

export const emptyCounts = (): ModelCounts => ({
  running: 0,
  waiting: 0,
  completed: 0,
  promptTokens: 0,
  generatedTokens: 0,
  prefixQueries: 0,
  prefixHits: 0,
});

interface Metric {
  readonly name: string;
  readonly type: 'gauge' | 'counter';
  readonly help: string;
  readonly value: (c: ModelCounts, kvUsage: number) => number;
}

const METRICS: readonly Metric[] = [
  {
    name: 'vllm:num_requests_running',
    type: 'gauge',
    help: 'Number of requests in model execution batches.',
    value: (c) => c.running,
  },
  {
    name: 'vllm:num_requests_waiting',
    type: 'gauge',
    help: 'Number of requests waiting to be processed.',
    value: (c) => c.waiting,
  },
  {
    name: 'vllm:kv_cache_usage_perc',
    type: 'gauge',
    help: 'KV-cache usage. 1 means 100 percent usage.',
    value: (_c, kv) => kv,
  },
  // The pre-v1 name of the same gauge, for scrapers written against older vLLM.
  {
    name: 'vllm:gpu_cache_usage_perc',
    type: 'gauge',
    help: 'GPU KV-cache usage. 1 means 100 percent usage.',
    value: (_c, kv) => kv,
  },
  {
    name: 'vllm:prefix_cache_queries_total',
    type: 'counter',
    help: 'Prefix cache queries, in terms of number of queried tokens.',
    value: (c) => c.prefixQueries,
  },
  {
    name: 'vllm:prefix_cache_hits_total',
    type: 'counter',
    help: 'Prefix cache hits, in terms of number of cached tokens.',
    value: (c) => c.prefixHits,
  },
  {
    name: 'vllm:prompt_tokens_total',
    type: 'counter',
    help: 'Number of prefill tokens processed.',
    value: (c) => c.promptTokens,
  },
  {
    name: 'vllm:generation_tokens_total',
    type: 'counter',
    help: 'Number of generation tokens processed.',
    value: (c) => c.generatedTokens,
  },
  {
    name: 'vllm:request_success_total',
    type: 'counter',
    help: 'Count of successfully processed requests.',
    value: (c) => c.completed,
  },
];

const escapeLabel = (v: string): string =>
  v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

/**
 * vLLM's `vllm:lora_requests_info`: one series whose labels list the adapters of running and of
 * waiting requests (comma-separated) and max_lora; its value is when it was written (Unix s).
 */
export function loraRequestsInfo(info: LoraInfo, nowS: number): string {
  const labels =
    `max_lora="${info.maxLora}",running_lora_adapters="${escapeLabel(info.running.join(','))}",` +
    `waiting_lora_adapters="${escapeLabel(info.waiting.join(','))}"`;
  return (
    '# HELP vllm:lora_requests_info Running stats on lora requests.\n' +
    '# TYPE vllm:lora_requests_info gauge\n' +
    `vllm:lora_requests_info{${labels}} ${nowS}\n`
  );
}

/** One series per model, in `models` order; a model without counts reports zeros. With `lora`, its info series. */
export function prometheusText(
  models: readonly string[],
  counts: ReadonlyMap<string, ModelCounts>,
  kvUsage: number,
  lora?: LoraInfo,
): string {
  const zero = emptyCounts();
  const series = models.map((m) => ({ label: `{model_name="${escapeLabel(m)}"}`, c: counts.get(m) ?? zero }));
  let out = '';
  for (const m of METRICS) {
    out += `# HELP ${m.name} ${m.help}\n# TYPE ${m.name} ${m.type}\n`;
    for (const s of series) out += `${m.name}${s.label} ${m.value(s.c, kvUsage)}\n`;
  }
  if (lora) out += loraRequestsInfo(lora, Date.now() / 1000);
  return out;
}
