import type { EngineMetrics } from '../core/types.js';

/** Metric names per engine family: vLLM (and the emulated engine), SGLang. */
const RUNNING = ['vllm:num_requests_running', 'sglang:num_running_reqs'];
const WAITING = ['vllm:num_requests_waiting', 'sglang:num_queue_reqs'];
const KV = ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc', 'sglang:token_usage'];

/**
 * Running / waiting requests and KV usage from a Prometheus text page. One engine repeats its
 * totals under several label sets (a model name each, a TP rank each), so label sets are not
 * added: the largest is taken. Undefined when the page has none of the known names.
 */
export function parseEngineMetrics(text: string, at: number): EngineMetrics | undefined {
  let running: number | undefined;
  let waiting: number | undefined;
  let kv: number | undefined;
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const brace = line.indexOf('{');
    const space = line.lastIndexOf(' ');
    if (space < 0) continue;
    const name = line.slice(0, brace >= 0 && brace < space ? brace : line.indexOf(' '));
    const value = Number(line.slice(space + 1));
    if (!Number.isFinite(value)) continue;
    if (RUNNING.includes(name)) running = Math.max(running ?? 0, value);
    else if (WAITING.includes(name)) waiting = Math.max(waiting ?? 0, value);
    else if (KV.includes(name)) kv = Math.max(kv ?? 0, value);
  }
  if (running === undefined && waiting === undefined) return undefined;
  return { running: running ?? 0, waiting: waiting ?? 0, kvUsage: Math.min(1, Math.max(0, kv ?? 0)), at };
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
