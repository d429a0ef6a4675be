/** One attempt in flight on a backend, as the stall watch sees it. */
export interface WatchedAttempt {
  readonly dispatchedAt: number;
  /** When the upstream's first byte arrived (undefined before). */
  readonly firstByteAt: number | undefined;
  /** Upstream chunks received so far (a counter: cheaper per chunk than reading a clock). */
  readonly chunks: number;
  /** Give the attempt up: it is retried elsewhere when nothing reached its client yet. */
  abandon(reason: string): void;
}

export interface StallOptions {
  /** Never judge a backend stuck before this long without progress. */
  readonly minMs: number;
  /** ... nor before `factor` times the first-byte time its requests usually take. */
  readonly factor: number;
  /** The first-byte timeout: a limit no sooner than it is left to it (as is a fleet with no history). */
  readonly fallbackMs: number;
}

interface BackendWatch {
  /** Each attempt with its chunk count at the last check. */
  readonly attempts: Map<WatchedAttempt, number>;
  /** EMA of dispatch → first upstream byte (ms); undefined before the first sample. */
  ttfbMs: number | undefined;
  /** Last time any attempt on this backend got a byte or finished. */
  progressAt: number;
}

const EMA_ALPHA = 0.2;

/**
 * Finds backends that hang while their health probe still answers: attempts get no first byte far
 * beyond what that backend (or, before it has history, the fleet) usually takes, and nothing else
 * on it progresses either. A slow but working engine keeps streaming or finishing something, so a
 * long queue alone never trips it. Host clock in; backends judged stuck out.
 */
export class StallWatch {
  private readonly backends = new Map<string, BackendWatch>();
  private fleetTtfbMs: number | undefined;

  constructor(private readonly opts: StallOptions) {}

  track(backend: string, a: WatchedAttempt, now: number): void {
    let w = this.backends.get(backend);
    if (!w) {
      w = { attempts: new Map(), ttfbMs: undefined, progressAt: now };
      this.backends.set(backend, w);
    }
    // An idle backend's silence is not a stall: progress counts from its first new attempt.
    if (w.attempts.size === 0) w.progressAt = now;
    w.attempts.set(a, a.chunks);
  }

  /** The attempt ended (any way); `progressed` when it got bytes or finished normally. */
  untrack(backend: string, a: WatchedAttempt, now: number, progressed: boolean): void {
    const w = this.backends.get(backend);
    if (!w) return;
    w.attempts.delete(a);
    if (progressed) w.progressAt = now;
    if (a.firstByteAt !== undefined) {
      const ms = a.firstByteAt - a.dispatchedAt;
      w.ttfbMs = w.ttfbMs === undefined ? ms : w.ttfbMs + EMA_ALPHA * (ms - w.ttfbMs);
      this.fleetTtfbMs =
        this.fleetTtfbMs === undefined ? ms : this.fleetTtfbMs + EMA_ALPHA * (ms - this.fleetTtfbMs);
    }
  }

  /**
   * How long this backend may go without progress before it is judged stuck; undefined when that
   * is no sooner than the first-byte timeout, which then ends its attempts as ordinary failures.
   */
  limitMs(backend: string): number | undefined {
    const usual = this.backends.get(backend)?.ttfbMs ?? this.fleetTtfbMs;
    if (usual === undefined) return undefined;
    const limit = Math.max(this.opts.minMs, this.opts.factor * usual);
    return limit < this.opts.fallbackMs ? limit : undefined;
  }

  /**
   * Backends stuck at `now`, each with the attempts to give up. Only attempts still waiting for
   * their first byte are judged: one already streaming is the idle timeout's to end.
   */
  check(now: number): { backend: string; attempts: WatchedAttempt[]; silentMs: number }[] {
    const out: { backend: string; attempts: WatchedAttempt[]; silentMs: number }[] = [];
    for (const [name, w] of this.backends) {
      if (w.attempts.size === 0) continue;
      for (const [a, seen] of w.attempts)
        if (a.chunks !== seen) {
          w.attempts.set(a, a.chunks);
          w.progressAt = now;
        }
      const limit = this.limitMs(name);
      const silentMs = now - w.progressAt;
      if (limit === undefined || silentMs < limit) continue;
      const waiting: WatchedAttempt[] = [];
      for (const a of w.attempts.keys())
        if (a.firstByteAt === undefined && now - a.dispatchedAt >= limit) waiting.push(a);
      if (waiting.length > 0) out.push({ backend: name, attempts: waiting, silentMs });
    }
    return out;
  }

  remove(backend: string): void {
    this.backends.delete(backend);
  }
}
