/**
 * Estimators must never turn NaN, Infinity or negative: one bad sample (an empty prompt, a zero
 * token count, a clock hiccup) would otherwise poison routing until restart.
 */
export function finiteOr<T extends number | undefined>(value: number, fallback: T): number | T {
  return Number.isFinite(value) && value >= 0 ? value : fallback;
}

/** Exponential moving average that ignores bad samples; undefined until the first good one. */
export class Ema {
  private v: number | undefined;
  private n = 0;
  constructor(private readonly alpha: number) {}

  get value(): number | undefined {
    return this.v;
  }

  get samples(): number {
    return this.n;
  }

  update(sample: number): void {
    if (!Number.isFinite(sample) || sample < 0) return;
    this.v = this.v === undefined ? sample : this.alpha * sample + (1 - this.alpha) * this.v;
    this.n++;
  }
}
