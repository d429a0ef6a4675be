/** Longest cool-down a backend's Retry-After may ask for: past it, health probes take over. */
const MAX_COOLDOWN_MS = 60_000;
/** A 429 without Retry-After still means "not now": this long. */
const DEFAULT_COOLDOWN_MS = 1_000;

/**
 * Backends that answered 429 (full, not broken) rest for their Retry-After before new requests
 * are sent to them, so a saturated backend stops attracting every retry. Held in the live host:
 * the core sees cooling backends as excluded for the requests submitted meanwhile.
 */
export class Cooldowns {
  private readonly until = new Map<string, number>();
  private cached: ReadonlySet<string> | undefined;
  private cachedAt = -Infinity;
  private soonestEnd = Infinity;

  /** `retryAfterS` as the backend sent it (undefined when absent or unreadable). */
  cool(backend: string, now: number, retryAfterS: number | undefined): void {
    const ms =
      retryAfterS === undefined ? DEFAULT_COOLDOWN_MS : Math.min(MAX_COOLDOWN_MS, retryAfterS * 1000);
    const end = now + ms;
    if ((this.until.get(backend) ?? 0) < end) this.until.set(backend, end);
    this.cached = undefined;
  }

  /** The backends cooling at `now` (the same set object while nothing changes: no per-request copy). */
  cooling(now: number): ReadonlySet<string> | undefined {
    if (this.until.size === 0) return undefined;
    if (this.cached && now < this.soonestEnd && now >= this.cachedAt) return this.cached;
    const s = new Set<string>();
    let soonest = Infinity;
    for (const [b, end] of this.until) {
      if (end <= now) this.until.delete(b);
      else {
        s.add(b);
        if (end < soonest) soonest = end;
      }
    }
    this.cached = s.size > 0 ? s : undefined;
    this.cachedAt = now;
    this.soonestEnd = soonest;
    return this.cached;
  }

  /** Seconds until the first cooling backend is back, rounded up; at least 1. */
  retryAfterS(now: number): number {
    let soonest = Infinity;
    for (const end of this.until.values()) if (end > now && end < soonest) soonest = end;
    return Number.isFinite(soonest) ? Math.max(1, Math.ceil((soonest - now) / 1000)) : 1;
  }

  forget(backend: string): void {
    if (this.until.delete(backend)) this.cached = undefined;
  }
}

/** A Retry-After header value in seconds: delta-seconds or an HTTP date; undefined when unreadable. */
export function parseRetryAfter(v: string | undefined, nowEpochMs: number): number | undefined {
  if (v === undefined) return undefined;
  const t = v.trim();
  if (/^\d+$/.test(t)) return Number(t);
  const d = Date.parse(t);
  return Number.isFinite(d) ? Math.max(0, (d - nowEpochMs) / 1000) : undefined;
}
