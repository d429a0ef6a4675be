/**
 * BurstGPT (HPMLL/BurstGPT: Azure OpenAI GPT service traffic of a university campus): CSV with a
 * header —
 *   Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
 *   5,ChatGPT,472,18,490,Conversation log
 *   45,ChatGPT,1087,62,1149,Conversation log
 * Timestamp in seconds from the trace start. Model and Log Type become the request's label (for
 * per-class reports); rows whose answer failed (Response tokens 0) are replayed with one token.
 */
import { csvNumber, csvReader, type TraceEntry, type TraceFormat } from './trace-format.js';

export const burstgptFormat: TraceFormat = {
  name: 'burstgpt',
  absoluteTime: false,
  detect: (line) => /request tokens/i.test(line) && /response tokens/i.test(line),
  reader: csvReader(['Timestamp', 'Request tokens', 'Response tokens'], (cells, col): TraceEntry => {
    const mi = col('Model');
    const ki = col('Log Type');
    const model = mi !== undefined ? cells[mi]?.trim() : undefined;
    const kind = ki !== undefined ? cells[ki]?.trim() : undefined;
    const label = [model, kind?.replace(/ log$/i, '').toLowerCase()].filter((x) => x).join(' ');
    return {
      at: csvNumber(cells[col('Timestamp')!], 'Timestamp', false),
      promptTokens: csvNumber(cells[col('Request tokens')!], 'Request tokens', true),
      outputTokens: Math.max(1, csvNumber(cells[col('Response tokens')!], 'Response tokens', true)),
      label: label === '' ? undefined : label,
    };
  }),
};
