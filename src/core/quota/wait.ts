/**
 * Shape a raw "capacity in X ms" into the hint returned to callers (the quota-aware router iteration 2 §D):
 * jitter ±10% so callers told the same thing don't come back together, then round the wake-up
 * time up to the next tick boundary (when window capacity actually returns), floor `minWaitMs`.
 * `random` is injected (the core reads no clock and owns no randomness).
 */
export function shapeWait(
  baseMs: number,
  now: number,
  tickMs: number,
  minWaitMs: number,
  random: () => number,
): number {
  const jittered = Math.max(0, baseMs) * (0.9 + 0.2 * clamp01(random()));
  const wake = Math.ceil((now + jittered) / tickMs) * tickMs;
  return Math.max(minWaitMs, Math.ceil(wake - now));
}

function clamp01(x: number): number {
  return Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 0.5;
}

/**
 * Expected time until one of `inFlight` leases ends, from their mean lifetime (if each ends at a
 * uniformly random point of its life, the first of n ends after about mean/(n+1)); bounded so a
 * bad estimate neither hot-loops callers nor parks them.
 */
export function slotReleaseMs(meanHoldMs: number | null, inFlight: number, fallbackMs: number): number {
  if (meanHoldMs === null || !(meanHoldMs > 0)) return fallbackMs;
  return Math.min(10_000, Math.max(50, meanHoldMs / (Math.max(1, inFlight) + 1)));
}
