import type { EngineCacheInfo, EngineMetrics, LoraMetrics } from '../core/types.js';

/**
 * Metric names per engine family: vLLM (and the emulated engine), SGLang, llama.cpp's server
 * (`llama-server --metrics`: slots busy, requests deferred for want of a slot, KV cells used).
 */
const RUNNING = ['vllm:num_requests_running', 'sglang:num_running_reqs', 'llamacpp:requests_processing'];
const WAITING = ['vllm:num_requests_waiting', 'sglang:num_queue_reqs', 'llamacpp:requests_deferred'];
const KV = [
  'vllm:kv_cache_usage_perc',
  'vllm:gpu_cache_usage_perc',
  'sglang:token_usage',
  'llamacpp:kv_cache_usage_ratio',
];
/** Prefix-cache counters, in prompt tokens (vLLM v1 and the emulated engine). */
const CACHE_QUERIES = 'vllm:prefix_cache_queries_total';
const CACHE_HITS = 'vllm:prefix_cache_hits_total';

/** vLLM's cache configuration gauge: labels block_size and num_gpu_blocks (the KV pool), value 1. */
const CACHE_CONFIG = 'vllm:cache_config_info';

/** vLLM's LoRA gauge: labels max_lora, running_lora_adapters, waiting_lora_adapters; value: when (Unix s). */
const LORA_INFO = 'vllm:lora_requests_info';

/** A label's value in a series' label text; undefined when absent. */
function label(labels: string, key: string): string | undefined {
  const m = new RegExp(`(?:^|[{,\\s])${key}="((?:[^"\\\\]|\\\\.)*)"`).exec(labels);
  return m ? m[1]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c)) : undefined;
}

/** The adapters of a comma-separated label value. */
const adapterList = (v: string | undefined): string[] =>
  v === undefined || v === '' ? [] : v.split(',').filter((a) => a !== '');

/**
 * The latest `vllm:lora_requests_info` series (vLLM may keep older ones: the largest timestamp
 * wins); undefined without one or without a positive max_lora.
 */
function loraOf(labels: string, value: number, prev: { at: number; m: LoraMetrics } | undefined) {
  if (prev && prev.at >= value) return prev;
  const maxLora = Number(label(labels, 'max_lora'));
  if (!(Number.isInteger(maxLora) && maxLora > 0)) return prev;
  return {
    at: value,
    m: {
      maxLora,
      running: adapterList(label(labels, 'running_lora_adapters')),
      waiting: adapterList(label(labels, 'waiting_lora_adapters')),
    },
  };
}

/** The model_name label of a series' label text (`{a="x",model_name="m"}`); '' when it has none. */
function modelLabel(labels: string): string {
  const m = /(?:^|[{,\s])model_name="((?:[^"\\]|\\.)*)"/.exec(labels);
  return m ? m[1]! : '';
}

/** Largest value per model, then summed over models. */
function addModels(
  perModel: Map<string, number> | undefined,
  model: string,
  value: number,
): Map<string, number> {
  const m = perModel ?? new Map<string, number>();
  m.set(model, Math.max(m.get(model) ?? 0, value));
  return m;
}
const total = (perModel: Map<string, number> | undefined): number | undefined => {
  if (perModel === undefined) return undefined;
  let sum = 0;
  for (const v of perModel.values()) sum += v;
  return sum;
};

/**
 * Running / waiting requests and KV usage from a Prometheus text page. vLLM and SGLang count each
 * request under its own model_name, so the engine's running and waiting are the SUM over model
 * names. Series of one model that differ in other labels (a TP rank each) repeat the same number:
 * of those the largest is taken. KV usage is the share of one pool: the largest series. Undefined
 * when the page has none of the known names.
 */
export function parseEngineMetrics(text: string, at: number): EngineMetrics | undefined {
  let running: Map<string, number> | undefined;
  let waiting: Map<string, number> | undefined;
  let kv: number | undefined;
  let queries: Map<string, number> | undefined;
  let hits: Map<string, number> | undefined;
  let lora: { at: number; m: LoraMetrics } | undefined;
  let cache: EngineCacheInfo | undefined;
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const brace = line.indexOf('{');
    const space = line.lastIndexOf(' ');
    if (space < 0) continue;
    const labelled = brace >= 0 && brace < space;
    const name = line.slice(0, labelled ? brace : line.indexOf(' '));
    const value = Number(line.slice(space + 1));
    if (!Number.isFinite(value)) continue;
    const isRunning = RUNNING.includes(name);
    const isCache = name === CACHE_QUERIES || name === CACHE_HITS;
    if (isRunning || WAITING.includes(name) || isCache) {
      const close = labelled ? line.lastIndexOf('}', space) : -1;
      const model = close > brace ? modelLabel(line.slice(brace, close + 1)) : '';
      if (isRunning) running = addModels(running, model, value);
      else if (name === CACHE_QUERIES) queries = addModels(queries, model, value);
      else if (name === CACHE_HITS) hits = addModels(hits, model, value);
      else waiting = addModels(waiting, model, value);
    } else if (KV.includes(name)) kv = Math.max(kv ?? 0, value);
    else if (name === LORA_INFO && labelled) lora = loraOf(line.slice(brace, space), value, lora);
    else if (name === CACHE_CONFIG && labelled) cache = cacheConfigOf(line.slice(brace, space)) ?? cache;
  }
  if (running === undefined && waiting === undefined) return undefined;
  return {
    running: total(running) ?? 0,
    waiting: total(waiting) ?? 0,
    kvUsage: Math.min(1, Math.max(0, kv ?? 0)),
    at,
    ...(queries !== undefined && hits !== undefined
      ? { prefixCacheQueries: total(queries), prefixCacheHits: total(hits) }
      : {}),
    ...(lora !== undefined ? { lora: lora.m } : {}),
    ...(cache !== undefined ? { cache } : {}),
  };
}

/** block_size × num_gpu_blocks of a `vllm:cache_config_info` series; undefined unless both are positive integers. */
function cacheConfigOf(labels: string): EngineCacheInfo | undefined {
  const block = Number(label(labels, 'block_size'));
  const blocks = Number(label(labels, 'num_gpu_blocks'));
  if (!(Number.isInteger(block) && block > 0 && Number.isInteger(blocks) && blocks > 0)) return undefined;
  return { tokens: block * blocks };
}

/** parseLlamaProps of a page's text; null when it is not JSON or not llama.cpp's /props. */
export function llamaPropsOf(text: string): EngineCacheInfo | null {
  try {
    return parseLlamaProps(JSON.parse(text)) ?? null;
  } catch {
    return null;
  }
}

/**
 * llama.cpp server's /props: `total_slots` slots of `default_generation_settings.n_ctx` tokens
 * each, every slot keeping only the last prompt it ran. Undefined when the body is not that.
 */
export function parseLlamaProps(body: unknown): EngineCacheInfo | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const { total_slots: slots, default_generation_settings: g } = body as {
    total_slots?: unknown;
    default_generation_settings?: { n_ctx?: unknown } | null;
  };
  const ctx = typeof g === 'object' && g !== null ? g.n_ctx : undefined;
  if (!(typeof slots === 'number' && Number.isInteger(slots) && slots > 0)) return undefined;
  if (!(typeof ctx === 'number' && Number.isInteger(ctx) && ctx > 0)) return undefined;
  return { tokens: slots * ctx, slots };
}

/**
 * Ollama's /api/ps: which models are loaded (a request for another one pays a load of seconds to
 * minutes). Plain Ollama reports no queue, so there are engine metrics only when the emulated
 * engine adds its batch state under `llmlb`. Undefined when the body is not an /api/ps answer.
 */
export function parseOllamaPs(
  body: unknown,
  at: number,
): { loadedModels: Set<string>; metrics: EngineMetrics | undefined } | undefined {
  if (typeof body !== 'object' || body === null || !Array.isArray((body as { models?: unknown }).models))
    return undefined;
  const loadedModels = new Set<string>();
  for (const m of (body as { models: unknown[] }).models) {
    if (typeof m !== 'object' || m === null) continue;
    const { name, model } = m as { name?: unknown; model?: unknown };
    if (typeof name === 'string') loadedModels.add(name);
    if (typeof model === 'string') loadedModels.add(model);
  }
  const ext = (body as { llmlb?: { running?: unknown; waiting?: unknown; kvUsage?: unknown } }).llmlb;
  const num = (v: unknown): number | undefined =>
    typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;
  const running = num(ext?.running);
  const waiting = num(ext?.waiting);
  const metrics =
    running !== undefined && waiting !== undefined
      ? { running, waiting, kvUsage: Math.min(1, num(ext?.kvUsage) ?? 0), at }
      : undefined;
  return { loadedModels, metrics };
}
