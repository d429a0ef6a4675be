/** Fault injection for the emulated engine: what a broken, hung, crashing or flaky box does. */
import { HttpError, positiveInt, type Obj } from './http.js';

export interface EngineFaults {
  /**
   * Fraction of API requests answered 500 at once (seeded draws): generation requests, and also the
   * listing/version routes health probes use, so failRate 1 is a broken box that probes see as down.
   * /metrics, /healthz and /_emulator/* are never failed.
   */
  readonly failRate?: number;
  /** Fraction of generation requests answered 429 "busy" with `Retry-After: retryAfterS` (seeded draws). */
  readonly saturateRate?: number;
  /** The Retry-After (seconds) of a `saturateRate` 429; absent: no header. */
  readonly retryAfterS?: number;
  /** Accept generation requests and never answer them. */
  readonly hang?: boolean;
  /** Serve this many generation requests; the next one crashes the server (sockets destroyed, listener closed). */
  readonly exitAfter?: number;
  /** Streamed responses lose their socket after this many chunks. */
  readonly dieMidStreamAfterChunks?: number;
}

/** Fault settings as POSTed to /_emulator/faults; throws HttpError naming a bad field. */
export function parseFaults(o: Obj): EngineFaults {
  const out: { -readonly [K in keyof EngineFaults]: EngineFaults[K] } = {};
  for (const [k, v] of Object.entries(o)) {
    if (v === null || v === undefined) continue;
    const bad = (): never => {
      throw new HttpError(400, `faults.${k}: invalid value ${JSON.stringify(v)}`, 'invalid_faults');
    };
    if (k === 'failRate') out.failRate = typeof v === 'number' && v >= 0 && v <= 1 ? v : bad();
    else if (k === 'saturateRate') out.saturateRate = typeof v === 'number' && v >= 0 && v <= 1 ? v : bad();
    else if (k === 'retryAfterS')
      out.retryAfterS = Number.isInteger(v) && (v as number) >= 0 ? (v as number) : bad();
    else if (k === 'hang') out.hang = typeof v === 'boolean' ? v : bad();
    else if (k === 'exitAfter')
      out.exitAfter = Number.isInteger(v) && (v as number) >= 0 ? (v as number) : bad();
    else if (k === 'dieMidStreamAfterChunks') out.dieMidStreamAfterChunks = positiveInt(v) ?? bad();
    else throw new HttpError(400, `unknown fault '${k}'`, 'invalid_faults');
  }
  return out;
}
