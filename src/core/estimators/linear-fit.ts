/**
 * Online weighted least squares of y on x with exponential forgetting: y ≈ intercept + slope·x,
 * fitted from the recent samples (each update shrinks older ones' weight by 1 − alpha).
 *
 * Why a fit and not an EMA of a ratio: a rate measured on a batching engine depends on how busy it
 * was (a decode step slows with every sequence in the batch), so an EMA of raw samples mixes load
 * into "speed" and chases its own routing (a backend that looked fast gets work, looks slow, loses
 * it, …). Fitting the rate against the load it was measured at separates the two.
 *
 * The slope is used only once the samples' x spread is wide enough to tell it from noise
 * (`minSpread`, a standard deviation of x); until then the fit is flat (`y = mean y`) or, with
 * `throughOrigin`, the ratio Σy/Σx. The slope is clamped to [0, mean y / mean x] so the line never
 * falls with load and never goes below 0 at x = 0. Bad samples (NaN, ±∞, negative) are ignored.
 */
export interface LinearFitOptions {
  readonly alpha: number;
  /** Standard deviation of x below which no slope is fitted. */
  readonly minSpread: number;
  /** Without spread, fit y = k·x (a rate) rather than y = mean y. */
  readonly throughOrigin?: boolean;
}

export class LinearFit {
  private w = 0;
  private sx = 0;
  private sy = 0;
  private sxx = 0;
  private sxy = 0;
  private syy = 0;
  /** Σ weight², for the effective sample count. */
  private ww = 0;
  private n = 0;
  /**
   * The fit as of the last update (read far more often than updated: once per candidate and per
   * request in flight at each decision): slope (undefined before any sample), means, x variance.
   */
  private fitted: number | undefined = undefined;
  private mx = 0;
  private my = 0;
  private varX = 0;

  constructor(private readonly opts: LinearFitOptions) {}

  get samples(): number {
    return this.n;
  }

  update(x: number, y: number, weight = 1): void {
    if (!(Number.isFinite(x) && Number.isFinite(y) && Number.isFinite(weight))) return;
    if (x < 0 || y < 0 || !(weight > 0)) return;
    const keep = this.n === 0 ? 0 : 1 - this.opts.alpha;
    this.w = keep * this.w + weight;
    this.sx = keep * this.sx + weight * x;
    this.sy = keep * this.sy + weight * y;
    this.sxx = keep * this.sxx + weight * x * x;
    this.sxy = keep * this.sxy + weight * x * y;
    this.syy = keep * this.syy + weight * y * y;
    this.ww = keep * keep * this.ww + weight * weight;
    this.n++;
    this.refit();
  }

  private refit(): void {
    const mx = this.sx / this.w;
    const my = this.sy / this.w;
    const varX = Math.max(0, this.sxx / this.w - mx * mx);
    this.mx = mx;
    this.my = my;
    this.varX = varX;
    if (varX < this.opts.minSpread * this.opts.minSpread) {
      this.fitted = this.opts.throughOrigin && mx > 0 ? my / mx : 0;
      return;
    }
    const s = (this.sxy / this.w - mx * my) / varX;
    const cap = mx > 0 ? my / mx : 0;
    this.fitted = Math.min(cap, Math.max(0, s));
  }

  /** Fitted slope (0 without enough spread; the ratio when through the origin). */
  get slope(): number | undefined {
    return this.fitted;
  }

  /** Fitted y at x; undefined before any sample. */
  at(x: number): number | undefined {
    const s = this.fitted;
    if (s === undefined) return undefined;
    return Math.max(0, this.my + s * (x - this.mx));
  }

  /**
   * Standard error of the fitted value at x: how far the line itself may be off (not the spread of
   * single samples around it), from the residual variance and the effective sample count of the
   * weights. 0 before two samples (nothing to tell noise from).
   */
  stderr(x: number): number {
    if (this.n < 2) return 0;
    const s = this.fitted ?? 0;
    const mx = this.mx;
    const my = this.my;
    const varX = this.varX;
    const cov = this.sxy / this.w - mx * my;
    const varY = Math.max(0, this.syy / this.w - my * my);
    const flat = !this.opts.throughOrigin && s === 0;
    // Residuals around the line in use (the mean when flat, the ratio line through the origin).
    // The line in use always passes through the means, so its residual variance is this.
    const res = flat ? varY : Math.max(0, varY - 2 * s * cov + s * s * varX);
    const nEff = (this.w * this.w) / this.ww;
    const lever = varX > 0 && !flat ? ((x - mx) * (x - mx)) / varX : 0;
    const v = (res / nEff) * (1 + lever);
    return Number.isFinite(v) ? Math.sqrt(v) : 0;
  }
}
