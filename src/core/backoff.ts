/**
 * The delay before retry number `attempt` (1 = after the first failure): exponential from `base`,
 * capped at `cap`, with "equal jitter" — at least half the delay, so retries spread out but never
 * come back at once. `u` in [0, 1) is the caller's randomness (seeded in tests and simulations).
 */
export function backoffMs(attempt: number, base: number, cap: number, u: number): number {
  const exp = Math.min(cap, base * 2 ** Math.max(0, attempt - 1));
  return Math.round(exp * (0.5 + 0.5 * Math.min(1, Math.max(0, u))));
}
