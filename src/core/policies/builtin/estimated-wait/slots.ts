import type { BackendView } from '../../../types.js';
import type { BackendState } from './backend-state.js';

/**
 * How many requests an engine admits at once, as the estimated-wait policy sees it: from its
 * engine metrics when probed, else from what was learned (BackendState.slots and queuedAt).
 * `defaultSlots` is the count assumed until one is learned.
 */

/** Sequences the engine admits at once now (Infinity: no limit seen). */
export function slotsOf(b: BackendState, view: BackendView, defaultSlots: number): number {
  const m = view.metrics;
  const batching = b.slots >= 2 || (m !== undefined && m.running >= 2);
  let s: number;
  if (m !== undefined) {
    // The engine says whether it queues: requests waiting inside it now → it admits no more
    // than it runs. Otherwise a batching engine takes more (a queue once seen at some count
    // may have been a burst's KV pressure or one long prefill step, not a limit).
    if (m.waiting > 0) s = Math.max(1, m.running);
    else s = batching ? Infinity : Math.max(b.slots, defaultSlots);
  } else if (Number.isFinite(b.queuedAt)) s = Math.max(b.slots, b.queuedAt);
  else s = batching ? Infinity : Math.max(b.slots, defaultSlots);
  if (Number.isFinite(view.maxConcurrency)) s = Math.min(s, view.maxConcurrency);
  return Math.max(1, s);
}

/** Sequences the engine is known to run at once from what was learned alone (Infinity: no limit seen). */
export function slotsOfLearned(b: BackendState, defaultSlots: number): number {
  return Number.isFinite(b.queuedAt) || b.slots < 2 ? Math.max(b.slots, defaultSlots) : Infinity;
}

/**
 * Requests the engine takes now before one pushed there would wait behind another inside it
 * (at most one waits inside: it is admitted at the next room, and whoever comes later is still
 * free to go elsewhere). From engine metrics: at the last read it had `waiting` queued; what this
 * router pushed since joins them, each that ended since lets one in, and one that queued nothing
 * at the read still admits about as many as it has been seen run beyond its batch then (at
 * least one). Without metrics: the sequences it is known to run at once less those in flight
 * (no limit once seen batching without a queue; one before anything is known, so a burst at
 * start-up is not committed blind).
 */
export function roomInside(b: BackendState, view: BackendView, defaultSlots: number): number {
  const m = view.metrics;
  if (m === undefined) {
    const s = slotsOfLearned(b, defaultSlots);
    return Number.isFinite(s) ? Math.max(0, s + 1 - view.inFlight) : Infinity;
  }
  const net = view.dispatchedSinceMetrics - view.completedSinceMetrics;
  if (m.waiting > 0) return Math.max(0, 1 - m.waiting - net);
  return Math.max(0, Math.max(1, b.slots - m.running) + 1 - net);
}
