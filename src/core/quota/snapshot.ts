import type { QuotaLimits } from './limits.js';
import { activeHold } from './hold.js';
import type { QuotaState } from './state.js';
import { pruneWindow, windowUsage } from './window.js';

/** What admin and metrics show for one key. */
export interface QuotaSnapshot {
  model: string;
  limits: QuotaLimits;
  inFlight: number;
  /** Tokens / requests charged in the rolling minute. */
  windowTokens: number;
  windowRequests: number;
  deficit: number;
  /** Tokens reserved by a waiting large request (age bonus), or null. */
  holdTokens: number | null;
  retired: boolean;
}

export function snapshotState(state: QuotaState, now: number, tickMs: number): QuotaSnapshot[] {
  return Object.entries(state.models)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([model, m]) => {
      pruneWindow(m.slots, now, tickMs);
      const u = windowUsage(m.slots);
      return {
        model,
        limits: { ...m.limits },
        inFlight: m.inFlight,
        windowTokens: u.tokens,
        windowRequests: u.requests,
        deficit: m.deficit,
        holdTokens: activeHold(m.hold, now)?.tokens ?? null,
        retired: m.retired,
      };
    });
}

/** Σ maxConcurrent over live keys and Σ inFlight over all: the inputs of /advice. */
export function capacityOf(state: QuotaState): { capacity: number; inFlight: number } {
  let capacity = 0;
  let inFlight = 0;
  for (const m of Object.values(state.models)) {
    if (!m.retired) capacity += m.limits.maxConcurrent;
    inFlight += m.inFlight;
  }
  return { capacity, inFlight };
}
