/**
 * Several routers in front of one fleet (issue #19, HA): a shared view of per-backend in-flight
 * counts through Redis (`state.redis`), so N routers neither herd onto the backend each thinks idle
 * nor together push a backend past its `maxConcurrency`.
 *
 * Every `intervalMs` each router runs one Lua round (redis/shared-view.lua) that publishes its own
 * in-flight per backend and reads the others'. Policies see own (live) + others' (at the last
 * round) through withSharedView (src/federation/shared-view-policy.ts): in-flight-based pickers
 * (least-connections, estimated-wait, active-request-scorer) need it; SP-P and other engine-metric
 * pickers read engine-reported counts, global already. Caps are split as allowances: a router may
 * push a capped backend only up to its allowance, and allowances together never exceed the cap.
 *
 * A router that loses Redis says so at once (`up` false, llmlb_shared_view_up 0) and keeps routing
 * on its own counts. For `ttlMs` after its last good round it keeps the allowances it enforced
 * then (0 before any: a router starting while its connection opens does not take a whole cap):
 * the others still count what it holds until its fields expire. After that it falls back to its
 * configured caps (the routers together may then exceed a cap). When a round finds this router's
 * own fields gone although it had published them (FLUSHDB, a Redis restart), the others' are gone
 * too until their next round: for `ttlMs` its allowances may shrink but not grow, so the view
 * rebuilds without a backend going past its cap.
 *
 * Hand-over (with `demand`, i.e. sharedState, and a transport that delivers grants): a round
 * hands capacity it leaves free straight to the routers still waiting for it (the book grows
 * their held and tells them); a router applies a hand-over at once, so a slot freed at one router
 * reaches a request waiting at another in one round instead of two. A hand-over is a running count
 * per backend: one already counted by a round, or heard twice, is not applied again; one not
 * taken (lost, or heard while rebuilding) only keeps the book counting it until the next round.
 * With several routers waiting, the one whose oldest waiting request has waited longest gets the
 * first slot (`waitedMs`): fleet-wide first come, first served, as one router's queue would be.
 */
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type { Grant, RoundAnswer, RoundEntry } from './shared-view-book.js';

export type { Grant, RoundAnswer, RoundEntry } from './shared-view-book.js';

/**
 * How a round reaches the other routers: Redis (the Lua script, routers on several hosts) or the
 * cluster primary's book (`serve --workers N`, src/state/cluster-view.ts). Both run the same
 * allocation (shared-view-book.ts is the Lua's twin). A transport that fails rejects.
 */
export interface SharedViewTransport {
  round(
    routerId: string,
    nowMs: number,
    ttlMs: number,
    entries: readonly RoundEntry[],
  ): Promise<RoundAnswer[]>;
  /** Optional: hand-overs to any router as the book makes them (each router keeps its own). */
  grants?(onGrant: (g: Grant) => void): void;
}

export interface SharedBackendState {
  readonly name: string;
  /** This router's requests in flight there. */
  readonly inFlight: number;
  /** The configured cap (Infinity = none). */
  readonly cap: number;
}

export interface SharedViewHost {
  /** This router's backends now. */
  backends(): readonly SharedBackendState[];
  /** Requests waiting in this router's queue (its demand for more allowance). */
  queued(): number;
  /** The caps to enforce now: allowances, or the configured caps when Redis is lost. */
  applyCaps(caps: ReadonlyMap<string, number>): void;
  /**
   * Optional (sharedState): requests held for this backend alone, waiting for allowance there.
   * Asked for on top of in-flight + headroom; with it `queued` is not spread over every backend.
   */
  demand?(backend: string): number;
  /**
   * Optional (with demand): how long, in ms, this router's oldest request waiting for allowance on
   * this backend has waited (0: none). Hand-overs go to the longest-waiting router first.
   */
  waitedMs?(backend: string): number;
}

export interface SharedViewOptions {
  /** Unique per router process. */
  readonly routerId: string;
  readonly intervalMs?: number | undefined;
  /** A router silent this long is presumed gone; its share returns to the others. */
  readonly ttlMs?: number | undefined;
  readonly prefix?: string | undefined;
  /** Allowance a router keeps above its in-flight, so a new request need not wait for a round. */
  readonly headroom?: number | undefined;
  readonly now?: () => number;
}

const LUA = readFileSync(new URL('./redis/shared-view.lua', import.meta.url), 'utf8');

/** A subscribed connection (ioredis), for hand-overs on `<prefix>:shared-view:grants`. */
export interface GrantSubscriber {
  readonly status: string;
  subscribe(channel: string): Promise<unknown>;
  on(event: 'message', cb: (channel: string, message: string) => void): unknown;
  on(event: 'ready', cb: () => void): unknown;
}

/** A hand-over message as the Lua publishes it: "router granted name". */
export function parseGrant(message: string): Grant | undefined {
  const m = /^(\S+) (\d+) (.+)$/.exec(message);
  if (!m) return undefined;
  const granted = Number(m[2]);
  return Number.isSafeInteger(granted) ? { router: m[1]!, granted, key: m[3]! } : undefined;
}

/**
 * Rounds through Redis: one Lua call over two hashes per backend (`<prefix>:shared-view:<name>`,
 * and `<prefix>:shared-view-asks:<name>` for hand-overs). With `sub`, hand-overs are heard there.
 */
export function redisViewTransport(redis: Redis, prefix: string, sub?: GrantSubscriber): SharedViewTransport {
  redis.defineCommand('llmlbSharedView', { lua: LUA });
  const cmd = (
    redis as unknown as {
      llmlbSharedView(n: number, ...a: (string | number)[]): Promise<RoundAnswer[]>;
    }
  ).llmlbSharedView;
  const channel = `${prefix}:shared-view:grants`;
  return {
    round: (routerId, nowMs, ttlMs, entries) => {
      const keys = entries.map((e) => `${prefix}:shared-view:${e.key}`);
      for (const e of entries) keys.push(`${prefix}:shared-view-asks:${e.key}`);
      const args: (string | number)[] = [routerId, nowMs, ttlMs, channel];
      for (const e of entries)
        args.push(e.inFlight, e.cap, e.want, e.enforced, e.taken ?? -1, e.key, e.waitedMs ?? 0);
      return cmd.call(redis, keys.length, ...keys, ...args);
    },
    ...(sub
      ? {
          grants: (onGrant: (g: Grant) => void): void => {
            sub.on('message', (ch, message) => {
              if (ch !== channel) return;
              const g = parseGrant(message);
              if (g) onGrant(g);
            });
            // (Re)subscribed whenever the connection is ready, as the shared state's channel is.
            const join = (): void => void sub.subscribe(channel).catch(() => undefined);
            sub.on('ready', join);
            if (sub.status === 'ready') join();
          },
        }
      : {}),
  };
}

function isTransport(t: Redis | SharedViewTransport): t is SharedViewTransport {
  return typeof (t as Partial<SharedViewTransport>).round === 'function';
}

export class SharedView {
  private readonly others = new Map<string, number>();
  /** The allowance each capped backend is held to now (0 before the first round). */
  private readonly enforced = new Map<string, number>();
  private readonly opts: Required<Omit<SharedViewOptions, 'now'>>;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private inRound = false;
  private isUp = false;
  private readonly transport: SharedViewTransport;
  /** When the last round reached Redis (start() counts as one: nothing is held before it). */
  private lastUpAt = 0;
  /** Whether a round has published this router's fields (so their absence means they were lost). */
  private published = false;
  /** Until then allowances may shrink, not grow: the view is being rebuilt after a loss. */
  private rebuildUntil = 0;
  /** Rounds that failed (Redis down or slow); for /metrics. */
  failures = 0;
  /** Per capped backend: the hand-overs applied so far (the book's running count). */
  private readonly taken = new Map<string, number>();
  /** Whether hand-overs reach this router (the transport delivers them, and it has demand). */
  private readonly takesGrants: boolean;
  /** Whether the transport already delivers hand-overs to grant() (start() asks once). */
  private hearingGrants = false;
  /** Slots handed over to this router and applied; for /metrics. */
  grantsTaken = 0;

  constructor(
    transport: Redis | SharedViewTransport,
    private readonly host: SharedViewHost,
    opts: SharedViewOptions,
  ) {
    this.opts = {
      routerId: opts.routerId,
      intervalMs: opts.intervalMs ?? 100,
      ttlMs: opts.ttlMs ?? 1500,
      prefix: opts.prefix ?? 'llmlb',
      headroom: opts.headroom ?? 0,
    };
    this.now = opts.now ?? Date.now;
    this.transport = isTransport(transport) ? transport : redisViewTransport(transport, this.opts.prefix);
    this.takesGrants = this.transport.grants !== undefined && host.demand !== undefined;
  }

  /**
   * A hand-over heard: applied at once when it is this router's and newer than what it holds (a
   * round may have counted it already). Not while the view is down or being rebuilt: the book
   * then counts it held until this router's next round, which settles it.
   */
  grant(g: Grant): void {
    if (g.router !== this.opts.routerId || !this.timer || !this.isUp) return;
    if (this.now() < this.rebuildUntil) return;
    const held = this.enforced.get(g.key);
    const taken = this.taken.get(g.key) ?? 0;
    if (held === undefined || g.granted <= taken) return;
    this.taken.set(g.key, g.granted);
    this.enforced.set(g.key, held + g.granted - taken);
    this.grantsTaken += g.granted - taken;
    this.host.applyCaps(new Map([[g.key, held + g.granted - taken]]));
  }

  /** Other routers' in-flight requests on a backend at the last round (0 while Redis is lost). */
  readonly othersOf = (backend: string): number => this.others.get(backend) ?? 0;

  /** Whether the last round reached Redis. */
  get up(): boolean {
    return this.isUp;
  }

  /** Capped backends get no allowance before the first round (the others may hold it all). */
  start(): void {
    if (this.timer) return;
    const zero = new Map<string, number>();
    for (const b of this.host.backends()) if (Number.isFinite(b.cap)) zero.set(b.name, 0);
    this.host.applyCaps(zero);
    this.lastUpAt = this.now();
    // Once per view: a stop() and start() again must not hear each hand-over twice.
    if (this.takesGrants && !this.hearingGrants) {
      this.hearingGrants = true;
      this.transport.grants!((g) => this.grant(g));
    }
    // sync() turns a Redis failure into the fallback view; what still escapes is a bug: say so.
    const round = (): void => {
      this.sync().catch((err: unknown) =>
        process.stderr.write(`llmlb: shared view round failed: ${String(err)}\n`),
      );
    };
    this.timer = setInterval(round, this.opts.intervalMs);
    this.timer.unref();
    round();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private nudged = false;
  private again = false;

  /**
   * A round now rather than at the next interval (a request waits for allowance): at most one
   * queued; one asked for during a round runs right after it.
   */
  nudge(delayMs = 1): void {
    if (!this.timer) return;
    if (this.inRound) {
      this.again = true;
      return;
    }
    if (this.nudged) return;
    this.nudged = true;
    setTimeout(() => {
      this.nudged = false;
      this.sync().catch((err: unknown) =>
        process.stderr.write(`llmlb: shared view round failed: ${String(err)}\n`),
      );
    }, delayMs).unref();
  }

  /** One round; never throws (a failure switches to the router's own view). */
  async sync(): Promise<void> {
    if (this.inRound) return;
    this.inRound = true;
    let follow = 0;
    const list = this.host.backends();
    const demand = this.host.demand?.bind(this.host);
    const extra =
      this.opts.headroom + (demand ? 0 : Math.ceil(this.host.queued() / Math.max(1, list.length)));
    if (demand && this.isUp) {
      // What this router holds beyond what it wants goes back in this round, not the next: it
      // stops using it now (shrinking is always safe), so the book needs not wait for the answer.
      const shrunk = new Map<string, number>();
      for (const b of list) {
        if (!Number.isFinite(b.cap)) continue;
        const keep = b.inFlight + this.opts.headroom + demand(b.name);
        const held = this.enforced.get(b.name) ?? 0;
        if (held > keep) {
          this.enforced.set(b.name, keep);
          shrunk.set(b.name, keep);
        }
      }
      if (shrunk.size > 0) this.host.applyCaps(shrunk);
    }
    const takenAtSend = new Map(this.taken);
    const waited = this.host.waitedMs?.bind(this.host);
    const entries: RoundEntry[] = list.map((b) => {
      const capped = Number.isFinite(b.cap);
      return {
        key: b.name,
        inFlight: b.inFlight,
        cap: capped ? b.cap : -1,
        want: Math.min(b.inFlight + extra + (demand ? demand(b.name) : 0), 1e9),
        enforced: capped ? (this.enforced.get(b.name) ?? 0) : -1,
        ...(this.takesGrants && capped ? { taken: takenAtSend.get(b.name) ?? 0 } : {}),
        ...(this.takesGrants && capped && waited
          ? { waitedMs: Math.max(0, Math.floor(waited(b.name))) }
          : {}),
      };
    });
    try {
      const res = await this.transport.round(
        this.opts.routerId,
        Math.floor(this.now()),
        this.opts.ttlMs,
        entries,
      );
      const now = this.now();
      const lost = this.published && list.some((b, i) => Number.isFinite(b.cap) && res[i]![2] === 0);
      if (lost) this.rebuildUntil = now + this.opts.ttlMs;
      const rebuilding = now < this.rebuildUntil;
      const caps = new Map<string, number>();
      this.others.clear();
      let shrank = false;
      let unmet = false;
      list.forEach((b, i) => {
        const [othersIn, allowance, , granted = 0] = res[i]!;
        this.others.set(b.name, othersIn);
        if (allowance < 0) {
          caps.set(b.name, b.cap);
          return;
        }
        const held = this.enforced.get(b.name) ?? 0;
        // Hand-overs the round counted are in `allowance`; those heard since it ran come on top.
        const sent = takenAtSend.get(b.name) ?? 0;
        const had = this.taken.get(b.name) ?? 0;
        // granted < sent: the book lost its count (FLUSHDB, a restart): it starts again from there.
        const after = granted < sent ? 0 : Math.max(0, had - granted);
        if (this.takesGrants) this.taken.set(b.name, granted < sent ? granted : Math.max(had, granted));
        const cap = (rebuilding ? Math.min(allowance, held) : allowance) + after;
        caps.set(b.name, cap);
        this.enforced.set(b.name, cap);
        if (cap < held) shrank = true;
        if (demand && cap < b.inFlight + demand(b.name)) unmet = true;
      });
      this.isUp = true;
      this.published = true;
      this.lastUpAt = now;
      this.host.applyCaps(caps);
      // With demand (sharedState): what this router gave up is told at once (the book counts it
      // held until then), and a request waiting for allowance asks again soon, not an interval on.
      follow = demand && shrank ? 1 : unmet ? 5 : 0;
    } catch {
      this.failures++;
      this.isUp = false;
      this.others.clear();
      // Within ttlMs of the last good round the others still count what this router holds: keep
      // its allowances. Later they have taken them back: its own configured caps, degraded.
      if (this.now() - this.lastUpAt >= this.opts.ttlMs) {
        for (const b of list) if (Number.isFinite(b.cap)) this.enforced.set(b.name, b.cap);
        this.host.applyCaps(new Map(list.map((b) => [b.name, b.cap])));
      } else {
        const caps = new Map<string, number>();
        for (const b of list)
          caps.set(b.name, Number.isFinite(b.cap) ? (this.enforced.get(b.name) ?? 0) : b.cap);
        this.host.applyCaps(caps);
      }
    } finally {
      this.inRound = false;
      if (this.again) {
        this.again = false;
        this.nudge();
      } else if (follow > 0) this.nudge(follow);
    }
  }
}
