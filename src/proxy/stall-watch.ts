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

/**
 * What the host knows of an attempt's answer when it starts. A non-streamed answer's first byte is
 * the whole answer: waiting for it is not a stall until its expected duration has passed too.
 */
export interface AttemptShape {
  /** true when the response is streamed (its first byte is its first token). */
  readonly streamed: boolean;
  /** The client's cap on output tokens (max_tokens / num_predict), when it gave one. */
  readonly maxTokens?: number | undefined;
}

interface Watched {
  /** The attempt's chunk count at the last check. */
  seen: number;
  readonly shape: AttemptShape;
}

interface BackendWatch {
  readonly attempts: Map<WatchedAttempt, Watched>;
  /** EMA of dispatch → first upstream byte (ms) of streamed answers; undefined before a sample. */
  ttfbMs: number | undefined;
  /** EMA of ms per output token of whole answers and streams; undefined before a sample. */
  msPerToken: number | undefined;
  /** Last time any attempt on this backend got a byte or finished. */
  progressAt: number;
}

const EMA_ALPHA = 0.2;

/** Output tokens a non-streamed answer with no cap is expected to take at most (for its limit). */
export const UNCAPPED_ANSWER_TOKENS = 2048;
/** A whole answer may take this many times its expected duration before it counts as stalled. */
const WHOLE_ANSWER_SLACK = 3;

const ema = (old: number | undefined, v: number): number =>
  old === undefined ? v : old + EMA_ALPHA * (v - old);

/**
 * Finds backends that hang while their health probe still answers: attempts get no first byte far
 * beyond what that backend (or, before it has history, the fleet) usually takes, and nothing else
 * on it progresses either. A slow but working engine keeps streaming or finishing something, so a
 * long queue alone never trips it. Host clock in; backends judged stuck out.
 */
export class StallWatch {
  private readonly backends = new Map<string, BackendWatch>();
  private fleetTtfbMs: number | undefined;
  private fleetMsPerToken: number | undefined;

  constructor(private readonly opts: StallOptions) {}

  track(backend: string, a: WatchedAttempt, now: number, shape: AttemptShape = { streamed: true }): void {
    let w = this.backends.get(backend);
    if (!w) {
      w = { attempts: new Map(), ttfbMs: undefined, msPerToken: undefined, progressAt: now };
      this.backends.set(backend, w);
    }
    // An idle backend's silence is not a stall: progress counts from its first new attempt.
    if (w.attempts.size === 0) w.progressAt = now;
    w.attempts.set(a, { seen: a.chunks, shape });
  }

  /**
   * The attempt ended (any way); `progressed` when it got bytes or finished normally;
   * `outputTokens` the tokens of a complete answer (its usage), when known.
   */
  untrack(backend: string, a: WatchedAttempt, now: number, progressed: boolean, outputTokens?: number): void {
    const w = this.backends.get(backend);
    if (!w) return;
    const streamed = w.attempts.get(a)?.shape.streamed ?? true;
    w.attempts.delete(a);
    if (progressed) w.progressAt = now;
    if (a.firstByteAt === undefined) return;
    // A whole answer's first byte is its end: no sample of the time to a first token.
    if (streamed) {
      const ms = a.firstByteAt - a.dispatchedAt;
      w.ttfbMs = ema(w.ttfbMs, ms);
      this.fleetTtfbMs = ema(this.fleetTtfbMs, ms);
    }
    // A stream without usage: its chunks (a chunk holds one token or more, so this errs long).
    const tokens = outputTokens ?? (streamed && a.chunks > 1 ? a.chunks : undefined);
    if (tokens !== undefined && tokens > 0 && Number.isFinite(tokens)) {
      // Per token of the whole exchange (prefill included): an upper bound, fine for a limit.
      const ms = (now - a.dispatchedAt) / tokens;
      if (Number.isFinite(ms) && ms >= 0) {
        w.msPerToken = ema(w.msPerToken, ms);
        this.fleetMsPerToken = ema(this.fleetMsPerToken, ms);
      }
    }
  }

  /**
   * How long a non-streamed attempt may wait for its (whole) answer before its silence counts,
   * beyond the backend's limit: its expected duration with slack, from the ms per token this
   * backend (or the fleet) takes and its cap. Undefined when nothing is known or that is no sooner
   * than the first-byte timeout (which then ends it as an ordinary failure).
   */
  wholeAnswerMs(backend: string, shape: AttemptShape): number | undefined {
    const perToken = this.backends.get(backend)?.msPerToken ?? this.fleetMsPerToken;
    if (perToken === undefined) return undefined;
    const tokens = shape.maxTokens ?? UNCAPPED_ANSWER_TOKENS;
    const ms = WHOLE_ANSWER_SLACK * perToken * tokens;
    return ms < this.opts.fallbackMs ? ms : undefined;
  }

  /**
   * How long this backend may go without progress before it is judged stuck; undefined when that
   * is no sooner than the first-byte timeout, which then ends its attempts as ordinary failures.
   */
  limitMs(backend: string): number | undefined {
    const w = this.backends.get(backend);
    const usual = w?.ttfbMs ?? this.fleetTtfbMs;
    // Only whole answers seen (no time to a first token): the floor, once answers were seen at all.
    const perToken = w?.msPerToken ?? this.fleetMsPerToken;
    if (usual === undefined && perToken === undefined) return undefined;
    const limit = Math.max(this.opts.minMs, this.opts.factor * (usual ?? 0));
    return limit < this.opts.fallbackMs ? limit : undefined;
  }

  /**
   * Backends stuck at `now`, each with the attempts to give up. Only attempts still waiting for
   * their first byte are judged: one already streaming is the idle timeout's to end. A backend is
   * stuck when nothing on it progressed for its limit and an attempt has waited past its own: the
   * limit for a stream, the limit plus its expected duration for a whole (non-streamed) answer.
   * Once one attempt condemns it, every attempt still waiting there is given up (the host's
   * AttemptBook), so a hung backend with any streamed traffic is found as soon as before.
   */
  check(now: number): { backend: string; attempts: WatchedAttempt[]; silentMs: number }[] {
    const out: { backend: string; attempts: WatchedAttempt[]; silentMs: number }[] = [];
    for (const [name, w] of this.backends) {
      if (w.attempts.size === 0) continue;
      for (const [a, x] of w.attempts)
        if (a.chunks !== x.seen) {
          x.seen = a.chunks;
          w.progressAt = now;
        }
      const limit = this.limitMs(name);
      const silentMs = now - w.progressAt;
      if (limit === undefined || silentMs < limit) continue;
      const waiting: WatchedAttempt[] = [];
      for (const [a, x] of w.attempts) {
        if (a.firstByteAt !== undefined) continue;
        let own = limit;
        if (!x.shape.streamed) {
          const whole = this.wholeAnswerMs(name, x.shape);
          if (whole === undefined) continue;
          own += whole;
        }
        if (now - a.dispatchedAt >= own) waiting.push(a);
      }
      if (waiting.length > 0) out.push({ backend: name, attempts: waiting, silentMs });
    }
    return out;
  }

  remove(backend: string): void {
    this.backends.delete(backend);
  }
}
