import type { BackendView } from './types.js';

/** A backend's engine load as best known now: the last scrape, corrected by the router's own pushes. */
export interface EngineLoad {
  /** Requests waiting inside the engine (not yet in its running batch). */
  readonly waiting: number;
  readonly running: number;
  /** KV-cache usage in [0, 1] at the scrape (not corrected: the router cannot see token counts). */
  readonly kvUsage: number;
  /** ms since the scrape. */
  readonly ageMs: number;
}

/**
 * Scrape-only routers are blind between scrapes: every request pushed in that gap sees the same
 * "empty queue" and piles onto one engine. So requests the router pushed since the scrape count as
 * waiting until a scrape shows otherwise (conservative: they may in fact have joined the batch), and
 * requests that ended since let waiting ones in. Returns undefined without metrics or when they are
 * older than `staleAfterMs`: callers then fall back to the router's own in-flight count.
 */
export function engineLoad(b: BackendView, now: number, staleAfterMs: number): EngineLoad | undefined {
  const m = b.metrics;
  if (!m) return undefined;
  const ageMs = now - m.at;
  if (!(ageMs <= staleAfterMs)) return undefined;
  const delta = b.dispatchedSinceMetrics - b.completedSinceMetrics;
  const outstanding = Math.max(0, m.running + m.waiting + delta);
  const waiting = Math.max(0, m.waiting + delta);
  return { waiting, running: outstanding - waiting, kvUsage: m.kvUsage, ageMs };
}

/**
 * engineLoad's `waiting` alone, without building the object (filters run it on every candidate of
 * every decision): -1 without metrics or when they are older than `staleAfterMs`.
 */
export function engineWaiting(b: BackendView, now: number, staleAfterMs: number): number {
  const m = b.metrics;
  if (!m || !(now - m.at <= staleAfterMs)) return -1;
  return Math.max(0, m.waiting + b.dispatchedSinceMetrics - b.completedSinceMetrics);
}

/**
 * Requests queued at a backend, for queue-based scorers: the engine's corrected waiting count when
 * metrics are fresh, else what the router has in flight there beyond nothing (it cannot know slots).
 */
export function queuedAt(b: BackendView, now: number, staleAfterMs: number): number {
  const w = engineWaiting(b, now, staleAfterMs);
  return w >= 0 ? w : b.inFlight;
}
