/**
 * Age bonus, so large requests don't starve (the quota-aware router iteration 2 §C).
 *
 * The quota-aware router adds an age bonus to WDRR deficits. Here WDRR rounds are computed in closed form
 * (wdrr.ts), so a deficit never keeps a request out; what starves a large request is the token
 * window: small requests keep taking what frees up. So the bonus is a reservation: the first
 * request refused for tokens at a model opens a hold (a larger refused one grows it); once it has
 * waited `ageBonusMs`, smaller requests may only use tokens beyond what the hold needs. The hold ends when a request at least
 * as large is admitted there, or when its holder stops retrying (expiresAt).
 */
export interface Hold {
  tokens: number;
  since: number;
  /** Dropped after this (the holder's last wait hint + grace) unless it retries. */
  expiresAt: number;
}

export function activeHold(hold: Hold | null, now: number): Hold | null {
  return hold && hold.expiresAt > now ? hold : null;
}

/** Tokens a request of `tokens` must leave free for an aged hold (0 when none applies). */
export function reservedFor(hold: Hold | null, tokens: number, now: number, ageBonusMs: number): number {
  const h = activeHold(hold, now);
  if (!h || tokens >= h.tokens) return 0;
  return now - h.since >= ageBonusMs ? h.tokens : 0;
}

/**
 * After a refusal for tokens: open a hold, or refresh it when a request at least its size retries
 * (growing it to the larger size: the largest waiter is the one small requests starve; the age is
 * the longest wait at this model). Smaller refusals leave it as is.
 */
export function noteTokenRefusal(
  hold: Hold | null,
  tokens: number,
  now: number,
  waitMs: number,
  graceMs: number,
): Hold {
  const h = activeHold(hold, now);
  const expiresAt = now + waitMs + graceMs;
  if (!h) return { tokens, since: now, expiresAt };
  if (tokens >= h.tokens) return { tokens, since: h.since, expiresAt: Math.max(h.expiresAt, expiresAt) };
  return h;
}

/** After an admission: the hold is satisfied when a request at least its size got in. */
export function noteAdmission(hold: Hold | null, tokens: number, now: number): Hold | null {
  const h = activeHold(hold, now);
  return h && tokens < h.tokens ? h : null;
}
