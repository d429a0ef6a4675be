/** The one percentile of the project: benches, reports and the simulator all mean the same thing. */

/**
 * Nearest-rank percentile of ascending values: the smallest value with at least a fraction `q` of
 * the values at or below it (q = 0.5: the median's lower neighbour on even counts). NaN when empty:
 * no data is not a zero latency.
 */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  return sorted[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))]!;
}

/** An ascending copy (the input is left as it is). */
export function ascending(xs: Iterable<number>): number[] {
  return Array.from(xs).sort((a, b) => a - b);
}
