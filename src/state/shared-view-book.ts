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
 *
 * Hand-over (as in the Lua): capacity a round leaves free goes at once to the routers that take
 * hand-overs and whose last ask is not met, one slot at a time: the router whose oldest waiting
 * request has waited longest first (fleet-wide first come, first served, as one router's queue
 * would be), each router once before any twice, then most unmet, then by id. Their held grows in
 * the book and `onGrant` tells each once (the Lua publishes it), so a slot one router frees
 * reaches a router waiting for it in one round, not two (give back, then the waiter's own round).
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
  /** Hand-overs it has taken on this backend (the last `granted` it applied); absent: it takes none. */
  readonly taken?: number | undefined;
  /**
   * How long its oldest request waiting for allowance on this backend has waited, in ms (0 or
   * absent: none, or not told): hand-overs go to the longest-waiting router first.
   */
  readonly waitedMs?: number | undefined;
}

/** A hand-over: `router` now holds `granted` slots handed to it on `key` so far (a running count). */
export interface Grant {
  readonly router: string;
  readonly key: string;
  readonly granted: number;
}

/**
 * Per entry: [others' in-flight, this router's allowance (-1 = uncapped), 1 if this router's own
 * entry was there (0: its first round, or the book lost it: FLUSHDB, a restarted primary), slots
 * handed over to this router on this backend so far].
 */
export type RoundAnswer = [number, number, number, number];

interface Held {
  inFlight: number;
  held: number;
  expiresAt: number;
}

/** A router that takes hand-overs on a backend: its last ask, and what was handed to it so far. */
interface Ask {
  want: number;
  granted: number;
  /** When its oldest request waiting there began to wait (the round's clock); -1: none told. */
  since: number;
}

export class SharedViewBook {
  private readonly keys = new Map<string, Map<string, Held>>();
  private readonly asks = new Map<string, Map<string, Ask>>();

  /** `onGrant` hears every hand-over (the primary sends it to that worker). */
  constructor(private readonly onGrant?: (g: Grant) => void) {}

  round(id: string, now: number, ttlMs: number, entries: readonly RoundEntry[]): RoundAnswer[] {
    const out: RoundAnswer[] = [];
    for (const e of entries) {
      let fields = this.keys.get(e.key);
      if (!fields) {
        fields = new Map();
        this.keys.set(e.key, fields);
      }
      let asks = this.asks.get(e.key);
      if (!asks) {
        asks = new Map();
        this.asks.set(e.key, asks);
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
          asks.delete(router);
          continue;
        }
        othersIn += h.inFlight;
        othersHeld += Math.max(h.inFlight, h.held);
      }
      const allowance = e.cap >= 0 ? Math.max(0, Math.min(e.want, e.cap - othersHeld)) : -1;
      const taken = e.taken ?? -1;
      const granted = taken >= 0 ? (asks.get(id)?.granted ?? 0) : 0;
      const held = Math.max(allowance, e.enforced + Math.max(0, granted - Math.max(taken, 0)));
      fields.set(id, { inFlight: e.inFlight, held, expiresAt: now + ttlMs });
      const since =
        e.waitedMs !== undefined && Number.isFinite(e.waitedMs) && e.waitedMs > 0
          ? Math.floor(now - e.waitedMs)
          : -1;
      if (taken >= 0 && e.cap >= 0) asks.set(id, { want: e.want, granted, since });
      else asks.delete(id);
      if (e.cap >= 0) this.handOver(e.key, id, fields, asks, e.cap - othersHeld - Math.max(e.inFlight, held));
      out.push([othersIn, allowance, mine, granted]);
    }
    return out;
  }

  /**
   * Free capacity on `key` to the routers whose ask is not met, a slot at a time: longest waiting
   * first (a router that told no wait after those that did), each once before any twice, then
   * most unmet, then by id; each router told once, in the order of its first slot.
   */
  private handOver(
    key: string,
    self: string,
    fields: Map<string, Held>,
    asks: Map<string, Ask>,
    free: number,
  ): void {
    const given = new Map<string, number>();
    while (free > 0) {
      let best: string | undefined;
      let bestUnmet = 0;
      let bestServed = 0;
      let bestSince = 0;
      for (const [r, a] of asks) {
        const h = fields.get(r);
        if (r === self || !h) continue;
        const served = given.get(r) ?? 0;
        const unmet = a.want - Math.max(h.inFlight, h.held) - served;
        if (unmet <= 0) continue;
        if (
          best === undefined ||
          handOverFirst(served, a.since, unmet, r, bestServed, bestSince, bestUnmet, best)
        ) {
          best = r;
          bestUnmet = unmet;
          bestServed = served;
          bestSince = a.since;
        }
      }
      if (best === undefined) break;
      given.set(best, bestServed + 1);
      free--;
    }
    for (const [r, give] of given) {
      const h = fields.get(r)!;
      const a = asks.get(r)!;
      h.held = Math.max(h.inFlight, h.held) + give;
      a.granted += give;
      this.onGrant?.({ router: r, key, granted: a.granted });
    }
  }

  /** A router known gone (its process exited): what it held returns now, not after ttlMs. */
  drop(id: string): void {
    for (const [key, fields] of this.keys) {
      fields.delete(id);
      if (fields.size === 0) this.keys.delete(key);
    }
    for (const [key, asks] of this.asks) {
      asks.delete(id);
      if (asks.size === 0) this.asks.delete(key);
    }
  }

  /** What each live router holds on a backend (for tests and /metrics). */
  held(key: string): number {
    let n = 0;
    for (const h of this.keys.get(key)?.values() ?? []) n += Math.max(h.inFlight, h.held);
    return n;
  }
}

/**
 * Whether router `r` (served slots so far this round, waiting since, unmet) goes before the best so
 * far: fewer slots this round, then waiting longer (-1, not told, last), then more unmet, then id.
 */
function handOverFirst(
  served: number,
  since: number,
  unmet: number,
  r: string,
  bestServed: number,
  bestSince: number,
  bestUnmet: number,
  best: string,
): boolean {
  if (served !== bestServed) return served < bestServed;
  if (since !== bestSince) return bestSince < 0 || (since >= 0 && since < bestSince);
  if (unmet !== bestUnmet) return unmet > bestUnmet;
  return r < best;
}
