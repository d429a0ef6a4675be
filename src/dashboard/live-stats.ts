/**
 * Rolling per-second aggregates of finished requests for the dashboard: bounded memory (one slot
 * per second over a window), cheap to record on the request path, read once a second.
 */
export interface FinishedRequest {
  readonly backend: string;
  /** Wall-clock ms (Date.now()). */
  readonly at: number;
  readonly ok: boolean;
  readonly latencyMs: number;
  readonly outputTokens?: number | undefined;
  readonly error?: string | undefined;
}

interface Slot {
  second: number;
  completed: number;
  tokens: number;
  latencySum: number;
  perBackend: Map<string, { completed: number; tokens: number; latencySum: number }>;
}

export interface BackendRates {
  readonly requestsPerS: number;
  readonly tokensPerS: number;
  readonly meanLatencyMs: number | null;
  readonly recentErrors: readonly { at: number; message: string }[];
}

export class LiveStats {
  private readonly slots: Slot[];
  private readonly errors = new Map<string, { at: number; message: string }[]>();

  constructor(private readonly windowS = 300) {
    this.slots = Array.from({ length: windowS }, () => ({
      second: -1,
      completed: 0,
      tokens: 0,
      latencySum: 0,
      perBackend: new Map(),
    }));
  }

  private slot(second: number): Slot {
    const s = this.slots[second % this.windowS]!;
    if (s.second !== second) {
      s.second = second;
      s.completed = 0;
      s.tokens = 0;
      s.latencySum = 0;
      s.perBackend.clear();
    }
    return s;
  }

  record(e: FinishedRequest): void {
    if (!e.ok) {
      let list = this.errors.get(e.backend);
      if (!list) this.errors.set(e.backend, (list = []));
      list.push({ at: e.at, message: e.error ?? 'failed' });
      if (list.length > 5) list.shift();
      return;
    }
    const s = this.slot(Math.floor(e.at / 1000));
    const tokens = e.outputTokens ?? 0;
    s.completed++;
    s.tokens += tokens;
    s.latencySum += e.latencyMs;
    let b = s.perBackend.get(e.backend);
    if (!b) s.perBackend.set(e.backend, (b = { completed: 0, tokens: 0, latencySum: 0 }));
    b.completed++;
    b.tokens += tokens;
    b.latencySum += e.latencyMs;
  }

  /** Per-backend rates over the last `overS` complete seconds. */
  backend(name: string, now: number, overS = 10): BackendRates {
    const cur = Math.floor(now / 1000);
    let completed = 0;
    let tokens = 0;
    let latency = 0;
    for (let sec = cur - overS; sec < cur; sec++) {
      const s = this.slots[((sec % this.windowS) + this.windowS) % this.windowS]!;
      if (s.second !== sec) continue;
      const b = s.perBackend.get(name);
      if (!b) continue;
      completed += b.completed;
      tokens += b.tokens;
      latency += b.latencySum;
    }
    return {
      requestsPerS: completed / overS,
      tokensPerS: tokens / overS,
      meanLatencyMs: completed > 0 ? latency / completed : null,
      recentErrors: this.errors.get(name) ?? [],
    };
  }

  /** The fleet's last complete second. */
  fleet(now: number): { completedPerS: number; tokensPerS: number; meanLatencyMs: number | null } {
    const sec = Math.floor(now / 1000) - 1;
    const s = this.slots[((sec % this.windowS) + this.windowS) % this.windowS]!;
    if (s.second !== sec) return { completedPerS: 0, tokensPerS: 0, meanLatencyMs: null };
    return {
      completedPerS: s.completed,
      tokensPerS: s.tokens,
      meanLatencyMs: s.completed > 0 ? s.latencySum / s.completed : null,
    };
  }
}
