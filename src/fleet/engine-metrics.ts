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
