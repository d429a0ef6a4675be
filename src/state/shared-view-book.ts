/**
 * The shared view's allocation, without Redis: the same round as redis/shared-view.lua, on a book
 * held in memory by one process (`llmlb serve --workers N`: the primary holds it for its workers).
 * Both transports of SharedView (src/state/shared-view.ts) give the same answers for the same
 * rounds; shared-view-book.test.ts runs the two side by side.
 *
 * Allowance invariant (as in the Lua): a router dispatches only while its in-flight is below the
 * allowance it enforces; "held" = max(in-flight, new allowance, allowance still enforced) at its
 * last round; an allowance is at most the cap minus what every other live router holds, so
 * together they never exceed the cap. Routers silent for ttlMs are dropped (their capacity
 * returns); `drop` returns a router's share at once (the primary saw its worker exit).
 */

/** One backend in one router's round (the Lua's four arguments per key). */
export interface RoundEntry {
  readonly key: string;
  readonly inFlight: number;
  /** The configured cap; -1 = uncapped. */
  readonly cap: number;
  /** The allowance the router asks for (in-flight + headroom + its share of its queue). */
  readonly want: number;
  /** The allowance it enforces until this round's answer reaches it; -1 = uncapped. */
  readonly enforced: number;
}

/**
 * Per entry: [others' in-flight, this router's allowance (-1 = uncapped), 1 if this router's own
 * entry was there (0: its first round, or the book lost it: FLUSHDB, a restarted primary)].
 */
export type RoundAnswer = [number, number, number];

interface Held {
  inFlight: number;
  held: number;
  expiresAt: number;
}

export class SharedViewBook {
  private readonly keys = new Map<string, Map<string, Held>>();

  round(id: string, now: number, ttlMs: number, entries: readonly RoundEntry[]): RoundAnswer[] {
    const out: RoundAnswer[] = [];
    for (const e of entries) {
      let fields = this.keys.get(e.key);
      if (!fields) {
        fields = new Map();
        this.keys.set(e.key, fields);
      }
      let othersIn = 0;
      let othersHeld = 0;
      let mine = 0;
      for (const [router, h] of fields) {
        if (router === id) {
          mine = 1;
          continue;
        }
        if (h.expiresAt < now) {
          fields.delete(router);
          continue;
        }
        othersIn += h.inFlight;
        othersHeld += Math.max(h.inFlight, h.held);
      }
      const allowance = e.cap >= 0 ? Math.max(0, Math.min(e.want, e.cap - othersHeld)) : -1;
      fields.set(id, { inFlight: e.inFlight, held: Math.max(allowance, e.enforced), expiresAt: now + ttlMs });
      out.push([othersIn, allowance, mine]);
    }
    return out;
  }

  /** A router known gone (its process exited): what it held returns now, not after ttlMs. */
  drop(id: string): void {
    for (const [key, fields] of this.keys) {
      fields.delete(id);
      if (fields.size === 0) this.keys.delete(key);
    }
  }

  /** What each live router holds on a backend (for tests and /metrics). */
  held(key: string): number {
    let n = 0;
    for (const h of this.keys.get(key)?.values() ?? []) n += Math.max(h.inFlight, h.held);
    return n;
  }
}
