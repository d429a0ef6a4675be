/**
 * A non-streamed answer's wall time, split into prefill and decode by the backend's current model.
 *
 * Such an answer arrives whole, so the time to its first byte is its whole time: booking it as
 * prefill makes prefill explode and decode look free (issue #34). What the wall time does say is
 * prefill + decode of the tokens its usage reports, so both parts of the current model are scaled
 * by the same factor to fit it: W / (P·p + C·d). With no model yet, callers pass their priors
 * (their ratio is the prior split). The ratio p : d is not identifiable from one wall time: it
 * comes from answers that give it (streams, engine-measured durations) or from many whole answers
 * of varied sizes (WallRegression below).
 */
export interface WallSplit {
  /** Seconds of prefill for the whole prompt. */
  readonly prefillS: number;
  /** Seconds per output token. */
  readonly decodeSPerToken: number;
}

/**
 * `wallS` split as `promptTokens · prefillSPerToken : outTokens · decodeSPerToken` (rates: the
 * current estimates). Undefined when nothing can be learned: no time, no tokens, or rates that
 * are not positive finite numbers. Never NaN or Infinity.
 */
export function splitWall(
  wallS: number,
  promptTokens: number,
  outTokens: number,
  prefillSPerToken: number,
  decodeSPerToken: number,
): WallSplit | undefined {
  if (!(wallS > 0 && Number.isFinite(wallS))) return undefined;
  const prompt = Number.isFinite(promptTokens) && promptTokens > 0 ? promptTokens : 0;
  const out = Number.isFinite(outTokens) && outTokens > 0 ? outTokens : 0;
  const p = Number.isFinite(prefillSPerToken) && prefillSPerToken > 0 ? prefillSPerToken : 0;
  const d = Number.isFinite(decodeSPerToken) && decodeSPerToken > 0 ? decodeSPerToken : 0;
  const pre = prompt * p;
  const dec = out * d;
  const total = pre + dec;
  if (!(total > 0 && Number.isFinite(total))) return undefined;
  const k = wallS / total;
  return { prefillS: pre * k, decodeSPerToken: out > 0 ? d * k : 0 };
}

/** 1 − r² of prompt and output tokens (uncentred) below which the two rates are not told apart. */
const MIN_INDEPENDENCE = 0.05;

/**
 * Per-token rates from whole answers alone: least squares of wall time on prompt and output tokens
 * (W ≈ P·p + C·d, no intercept), with exponential forgetting. Answers whose prompt and output
 * lengths vary independently tell p from d, which a split by the current model cannot: its ratio
 * is only ever rescaled. `rates()` answers only when the samples identify both, positive.
 */
export class WallRegression {
  private spp = 0;
  private spc = 0;
  private scc = 0;
  private spw = 0;
  private scw = 0;
  private n = 0;

  constructor(private readonly alpha: number) {}

  update(promptTokens: number, outTokens: number, wallS: number): void {
    const ok = (v: number): boolean => Number.isFinite(v) && v >= 0;
    if (!(ok(promptTokens) && ok(outTokens) && ok(wallS))) return;
    if (promptTokens + outTokens === 0) return;
    const keep = this.n === 0 ? 0 : 1 - this.alpha;
    this.spp = keep * this.spp + promptTokens * promptTokens;
    this.spc = keep * this.spc + promptTokens * outTokens;
    this.scc = keep * this.scc + outTokens * outTokens;
    this.spw = keep * this.spw + promptTokens * wallS;
    this.scw = keep * this.scw + outTokens * wallS;
    this.n++;
  }

  /** Seconds per prompt and per output token, when identified (both positive and finite). */
  rates(): { prefillSPerToken: number; decodeSPerToken: number } | undefined {
    if (this.n < 3) return undefined;
    const det = this.spp * this.scc - this.spc * this.spc;
    if (!(det > MIN_INDEPENDENCE * this.spp * this.scc)) return undefined;
    const p = (this.spw * this.scc - this.scw * this.spc) / det;
    const d = (this.scw * this.spp - this.spw * this.spc) / det;
    if (!(p > 0 && d > 0 && Number.isFinite(p) && Number.isFinite(d))) return undefined;
    return { prefillSPerToken: p, decodeSPerToken: d };
  }
}
