/**
 * Azure LLM inference traces (Azure/AzurePublicDataset, 2023 and 2024): CSV with a header —
 *   TIMESTAMP,ContextTokens,GeneratedTokens
 *   2023-11-16 18:15:46.6805900,374,44
 *   2023-11-16 18:15:50.9951690,396,109
 * TIMESTAMP a UTC date with fractional seconds; the replay starts at the first row's time. No
 * prompt content: every request gets a unique stand-in prompt of its length (no shared prefixes).
 */
import { csvNumber, csvReader, LineError, type TraceEntry, type TraceFormat } from './trace-format.js';

const DATE = /^\s*(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(\.\d+)?\s*Z?\s*$/;

/** Seconds since the epoch for `2023-11-16 18:15:46.6805900` (UTC), or a plain number of seconds. */
export function azureTime(cell: string | undefined): number {
  const m = cell === undefined ? null : DATE.exec(cell);
  if (!m) return csvNumber(cell, 'TIMESTAMP', false);
  const [, y, mo, d, h, mi, s, frac] = m;
  const ms = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s));
  if (!Number.isFinite(ms)) throw new LineError('TIMESTAMP', `not a date: '${cell ?? ''}'`);
  return ms / 1000 + (frac ? Number(frac) : 0);
}

export const azureFormat: TraceFormat = {
  name: 'azure',
  absoluteTime: true,
  detect: (line) => /contexttokens/i.test(line) && /generatedtokens/i.test(line),
  reader: csvReader(['TIMESTAMP', 'ContextTokens', 'GeneratedTokens'], (cells, col): TraceEntry => ({
    at: azureTime(cells[col('TIMESTAMP')!]),
    promptTokens: csvNumber(cells[col('ContextTokens')!], 'ContextTokens', true),
    outputTokens: Math.max(1, csvNumber(cells[col('GeneratedTokens')!], 'GeneratedTokens', true)),
  })),
};
