/**
 * Parallelism advice (the quota-aware router iteration 2 §A): a rolling minute of /schedule outcomes turned into
 * a backpressure score in [0, 1] and a suggested number of concurrent workers.
 *
 *   score = clamp(0.5·norm(p95 wait, 25 ms, 1000 ms) + 0.5·(1 − admit rate), 0, 1)
 *   suggested = clamp(inFlight + round(headroom·(1 − score)), min(4, cap), cap)
 * where cap = Σ maxConcurrent and headroom = cap − inFlight. No traffic in the window → score 0.
 */
export interface Advice {
  backpressure_score: number;
  suggested_parallelism: number;
}

const WINDOW_MS = 60_000;
/** Keep the newest outcomes only: p95 over 4096 samples is plenty and bounds memory and sort cost. */
const MAX_SAMPLES = 4096;

export class AdviceWindow {
  #at: number[] = [];
  #wait: number[] = [];

  /** `waitMs` null = admitted. */
  record(now: number, waitMs: number | null): void {
    this.#at.push(now);
    this.#wait.push(waitMs === null ? -1 : waitMs);
    if (this.#at.length > MAX_SAMPLES * 2) this.#trim(this.#at.length - MAX_SAMPLES);
  }

  #trim(n: number): void {
    this.#at.splice(0, n);
    this.#wait.splice(0, n);
  }

  compute(now: number, inFlight: number, capacity: number): Advice {
    let drop = 0;
    while (drop < this.#at.length && this.#at[drop]! <= now - WINDOW_MS) drop++;
    if (drop > 0) this.#trim(drop);
    if (this.#at.length > MAX_SAMPLES) this.#trim(this.#at.length - MAX_SAMPLES);
    const n = this.#wait.length;
    let score = 0;
    if (n > 0) {
      const waits = this.#wait.map((w) => Math.max(0, w)).sort((a, b) => a - b);
      const p95 = waits[Math.min(n - 1, Math.ceil(0.95 * n) - 1)]!;
      const admits = this.#wait.filter((w) => w < 0).length;
      const norm = Math.min(1, Math.max(0, (p95 - 25) / (1000 - 25)));
      score = Math.min(1, Math.max(0, 0.5 * norm + 0.5 * (1 - admits / n)));
    }
    const cap = Math.max(0, capacity);
    const headroom = Math.max(0, cap - inFlight);
    const raw = inFlight + Math.round(headroom * (1 - score));
    const suggested = Math.min(cap, Math.max(Math.min(4, cap), raw));
    return { backpressure_score: Math.round(score * 1000) / 1000, suggested_parallelism: suggested };
  }
}
