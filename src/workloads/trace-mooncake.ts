/**
 * Mooncake traces (kvcache-ai/Mooncake, FAST '25): JSONL, one request per line —
 *   {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59]}
 * timestamp in milliseconds from the trace start; hash_ids one per 512-token block of the prompt,
 * equal ids for equal prefixes (the trace's own remapping of its block hashes). The ids become
 * the request's prefix blocks (src/workloads/trace-blocks.ts), so the engine model's prefix cache
 * and the prefix policies see the sharing the trace recorded.
 */
import { LineError, type TraceEntry, type TraceFormat } from './trace-format.js';

export const MOONCAKE_BLOCK_TOKENS = 512;

function nonNegInt(o: Record<string, unknown>, key: string): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
    throw new LineError(key, `expected a non-negative integer, got ${JSON.stringify(v)}`);
  return v;
}

export const mooncakeFormat: TraceFormat = {
  name: 'mooncake',
  absoluteTime: false,
  detect: (line) => line.trimStart().startsWith('{') && line.includes('"hash_ids"'),
  reader: () => (text) => {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (e) {
      throw new LineError(undefined, `not JSON (${(e as Error).message})`);
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json))
      throw new LineError(undefined, 'expected a JSON object');
    const o = json as Record<string, unknown>;
    const ts = o['timestamp'];
    if (typeof ts !== 'number' || !Number.isFinite(ts) || ts < 0)
      throw new LineError('timestamp', `expected non-negative milliseconds, got ${JSON.stringify(ts)}`);
    const promptTokens = nonNegInt(o, 'input_length');
    const outputTokens = nonNegInt(o, 'output_length');
    const ids = o['hash_ids'] ?? [];
    if (!Array.isArray(ids) || !ids.every((h) => typeof h === 'number' && Number.isSafeInteger(h)))
      throw new LineError('hash_ids', 'expected an array of integers');
    const entry: TraceEntry = {
      at: ts / 1000,
      promptTokens,
      // A zero-length answer is a request the engine still admits and answers with one token.
      outputTokens: Math.max(1, outputTokens),
      blocks: ids as number[],
      blockTokens: MOONCAKE_BLOCK_TOKENS,
    };
    return entry;
  },
};
