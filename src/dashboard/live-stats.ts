/**
 * Rolling per-second aggregates of finished requests, for the dashboard. Memory is bounded: the
 * fleet keeps one slot per second over the window (default 5 minutes), each backend one slot per
 * second over the last minute (with a latency histogram per slot) and its last five errors.
 * Recording is O(1) and allocation-free on the request path; reading is done once a second.
 * No clock is read here: callers pass wall-clock milliseconds (Date.now()).
 */

/** One finished request (or failed attempt) as the router saw it. */
export interface FinishedRequest {
  readonly backend: string;
  /** Wall-clock ms (Date.now()) when it finished. */
  readonly at: number;
  /** A full answer reached the client. */
  readonly ok: boolean;
  readonly latencyMs: number;
  /** Time to the first response byte, if one arrived. */
  readonly ttfbMs?: number | undefined;
  /**
   * Tokens the backend reported generating; undefined when it did not say (an OpenAI stream
   * without usage): such a request is counted as uncounted, not as 0 tokens.
   */
  readonly outputTokens?: number | undefined;
  /** False for requests that generate nothing (embeddings, model lookups): no tokens, never uncounted. */
  readonly generation?: boolean | undefined;
  /** What went wrong, when `ok` is false. */
  readonly error?: string | undefined;
}

export interface RecentError {
  /** Wall-clock ms. */
  readonly at: number;
  readonly message: string;
}

export interface BackendStats {
  /** Successful requests per second over the last RATE_S complete seconds. */
  readonly requestsPerS: number;
  /** Failed requests (and failed attempts) per second over the same seconds. */
  readonly errorsPerS: number;
  readonly tokensPerS: number;
  /** Successful generation requests per second whose tokens are unknown (not in tokensPerS). */
  readonly uncountedPerS: number;
  /** Latency percentiles of successful requests over the last minute (±5 %); null without any. */
  readonly p50LatencyMs: number | null;
  readonly p95LatencyMs: number | null;
  /** The last few errors, oldest first. */
  readonly recentErrors: readonly RecentError[];
}

/** One complete second of the whole fleet. */
export interface FleetSecond {
  /** Start of the second, wall-clock ms. */
  readonly t: number;
  readonly completed: number;
  readonly failed: number;
  readonly tokens: number;
  /** Completed generation requests whose tokens are unknown (not in `tokens`). */
  readonly uncounted: number;
  readonly meanLatencyMs: number | null;
  readonly meanTtfbMs: number | null;
}

export interface StatsSnapshot {
  readonly backends: ReadonlyMap<string, BackendStats>;
  /** Oldest first: from the first second anything was recorded (at most the window) to the last complete one. */
  readonly fleet: readonly FleetSecond[];
}

/** Seconds that per-backend rates average over. */
export const RATE_S = 10;
/** Seconds that per-backend latency percentiles cover. */
export const PERCENTILE_S = 60;
const ERRORS_KEPT = 5;

// Latency histogram: log-spaced buckets, 8 per doubling (each ~9 % wide), from 1/16 ms to ~4.6 h.
const PER_DOUBLING = 8;
const MIN_LOG2 = -4;
const BUCKETS = (24 - MIN_LOG2) * PER_DOUBLING;

function bucketOf(ms: number): number {
  if (!(ms > 0)) return 0;
  const i = Math.floor((Math.log2(ms) - MIN_LOG2) * PER_DOUBLING);
  return i < 0 ? 0 : i >= BUCKETS ? BUCKETS - 1 : i;
}

/** The geometric middle of a bucket. */
function bucketValue(i: number): number {
  return 2 ** ((i + 0.5) / PER_DOUBLING + MIN_LOG2);
}

interface FleetSlot {
  second: number;
  completed: number;
  failed: number;
  tokens: number;
  uncounted: number;
  latencySum: number;
  ttfbSum: number;
  ttfbCount: number;
}

class BackendRing {
  readonly seconds = new Float64Array(PERCENTILE_S).fill(-1);
  readonly completed = new Uint32Array(PERCENTILE_S);
  readonly failed = new Uint32Array(PERCENTILE_S);
  readonly tokens = new Float64Array(PERCENTILE_S);
  readonly uncounted = new Uint32Array(PERCENTILE_S);
  /** PERCENTILE_S histograms of BUCKETS counts, one per second. */
  readonly latency = new Uint32Array(PERCENTILE_S * BUCKETS);
  readonly errors: RecentError[] = [];
  firstSecond: number;
  lastSecond: number;

  constructor(second: number) {
    this.firstSecond = second;
    this.lastSecond = second;
  }

  /** The slot index for `second`, cleared if it held an older second; -1 if `second` is too old. */
  slot(second: number): number {
    const i = second % PERCENTILE_S;
    const held = this.seconds[i]!;
    if (held === second) return i;
    if (held > second) return -1;
    this.seconds[i] = second;
    this.completed[i] = 0;
    this.failed[i] = 0;
    this.tokens[i] = 0;
    this.uncounted[i] = 0;
    this.latency.fill(0, i * BUCKETS, (i + 1) * BUCKETS);
    return i;
  }

  stats(cur: number): BackendStats {
    // Rates over the last complete seconds, or fewer while the backend is new.
    const overS = Math.max(1, Math.min(RATE_S, cur - this.firstSecond));
    let completed = 0;
    let failed = 0;
    let tokens = 0;
    let uncounted = 0;
    for (let sec = cur - overS; sec < cur; sec++) {
      const i = sec % PERCENTILE_S;
      if (this.seconds[i] !== sec) continue;
      completed += this.completed[i]!;
      failed += this.failed[i]!;
      tokens += this.tokens[i]!;
      uncounted += this.uncounted[i]!;
    }
    // Percentiles over the last minute, the current (partial) second included.
    const hist = new Uint32Array(BUCKETS);
    let n = 0;
    for (let i = 0; i < PERCENTILE_S; i++) {
      const sec = this.seconds[i]!;
      if (sec <= cur - PERCENTILE_S || sec > cur) continue;
      for (let b = 0, o = i * BUCKETS; b < BUCKETS; b++) hist[b]! += this.latency[o + b]!;
      n += this.completed[i]!;
    }
    return {
      requestsPerS: completed / overS,
      errorsPerS: failed / overS,
      tokensPerS: tokens / overS,
      uncountedPerS: uncounted / overS,
      p50LatencyMs: percentile(hist, n, 0.5),
      p95LatencyMs: percentile(hist, n, 0.95),
      recentErrors: this.errors.slice(),
    };
  }
}

function percentile(hist: Uint32Array, n: number, q: number): number | null {
  if (n === 0) return null;
  const rank = Math.max(1, Math.ceil(q * n));
  let seen = 0;
  for (let b = 0; b < BUCKETS; b++) {
    seen += hist[b]!;
    if (seen >= rank) return bucketValue(b);
  }
  return bucketValue(BUCKETS - 1);
}

export class LiveStats {
  private readonly fleetSlots: FleetSlot[];
  private readonly perBackend = new Map<string, BackendRing>();
  private firstSecond = Infinity;

  /** @param windowS seconds of fleet history kept (at least PERCENTILE_S). */
  constructor(private readonly windowS = 300) {
    if (!Number.isInteger(windowS) || windowS < PERCENTILE_S)
      throw new RangeError(`LiveStats window must be an integer ≥ ${PERCENTILE_S} s`);
    this.fleetSlots = Array.from({ length: windowS }, () => ({
      second: -1,
      completed: 0,
      failed: 0,
      tokens: 0,
      uncounted: 0,
      latencySum: 0,
      ttfbSum: 0,
      ttfbCount: 0,
    }));
  }

  record(e: FinishedRequest): void {
    const second = Math.floor(e.at / 1000);
    if (!(second >= 0)) return;
    if (second < this.firstSecond) this.firstSecond = second;
    let ring = this.perBackend.get(e.backend);
    if (!ring) this.perBackend.set(e.backend, (ring = new BackendRing(second)));
    if (second > ring.lastSecond) ring.lastSecond = second;
    const fs = this.fleetSlot(second);
    const bi = ring.slot(second);

    if (!e.ok) {
      ring.errors.push({ at: e.at, message: e.error ?? 'failed' });
      if (ring.errors.length > ERRORS_KEPT) ring.errors.shift();
      if (fs) fs.failed++;
      if (bi >= 0) ring.failed[bi]!++;
      return;
    }
    const tokens = e.outputTokens !== undefined && e.outputTokens > 0 ? e.outputTokens : 0;
    const uncounted = e.outputTokens === undefined && e.generation !== false ? 1 : 0;
    if (fs) {
      fs.completed++;
      fs.tokens += tokens;
      fs.uncounted += uncounted;
      fs.latencySum += e.latencyMs;
      if (e.ttfbMs !== undefined) {
        fs.ttfbSum += e.ttfbMs;
        fs.ttfbCount++;
      }
    }
    if (bi >= 0) {
      ring.completed[bi]!++;
      ring.tokens[bi]! += tokens;
      ring.uncounted[bi]! += uncounted;
      ring.latency[bi * BUCKETS + bucketOf(e.latencyMs)]!++;
    }
  }

  /** Rates, percentiles and errors of one backend; undefined if nothing was recorded for it lately. */
  backend(name: string, now: number): BackendStats | undefined {
    return this.perBackend.get(name)?.stats(Math.floor(now / 1000));
  }

  /** The fleet's last complete second before `now`. */
  lastSecond(now: number): FleetSecond {
    return this.fleetSecond(Math.floor(now / 1000) - 1);
  }

  /** Every complete second in the window, oldest first, starting at the first one recorded. */
  fleetSeries(now: number): FleetSecond[] {
    const cur = Math.floor(now / 1000);
    const from = Math.max(this.firstSecond, cur - this.windowS);
    const out: FleetSecond[] = [];
    for (let sec = from; sec < cur; sec++) out.push(this.fleetSecond(sec));
    return out;
  }

  /** Everything at once; also forgets backends that recorded nothing during the window. */
  snapshot(now: number): StatsSnapshot {
    const cur = Math.floor(now / 1000);
    const backends = new Map<string, BackendStats>();
    for (const [name, ring] of this.perBackend) {
      if (ring.lastSecond <= cur - this.windowS) this.perBackend.delete(name);
      else backends.set(name, ring.stats(cur));
    }
    return { backends, fleet: this.fleetSeries(now) };
  }

  private fleetSlot(second: number): FleetSlot | undefined {
    const s = this.fleetSlots[second % this.windowS]!;
    if (s.second === second) return s;
    if (s.second > second) return undefined; // older than the window: dropped
    s.second = second;
    s.completed = 0;
    s.failed = 0;
    s.tokens = 0;
    s.uncounted = 0;
    s.latencySum = 0;
    s.ttfbSum = 0;
    s.ttfbCount = 0;
    return s;
  }

  private fleetSecond(sec: number): FleetSecond {
    const s = sec >= 0 ? this.fleetSlots[sec % this.windowS]! : undefined;
    const t = sec * 1000;
    if (!s || s.second !== sec)
      return { t, completed: 0, failed: 0, tokens: 0, uncounted: 0, meanLatencyMs: null, meanTtfbMs: null };
    return {
      t,
      completed: s.completed,
      failed: s.failed,
      tokens: s.tokens,
      uncounted: s.uncounted,
      meanLatencyMs: s.completed > 0 ? s.latencySum / s.completed : null,
      meanTtfbMs: s.ttfbCount > 0 ? s.ttfbSum / s.ttfbCount : null,
    };
  }
}
