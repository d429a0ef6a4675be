/**
 * A non-streamed answer's wall time, split into prefill and decode by the backend's current model.
 *
 * Such an answer arrives whole, so the time to its first byte is its whole time: booking it as
 * prefill makes prefill explode and decode look free (issue #34). What the wall time does say is
 * prefill + decode of the tokens its usage reports, so both parts of the current model are scaled
 * by the same factor to fit it: W / (P·p + C·d). With no model yet, callers pass their priors
 * (their ratio is the prior split). The ratio p : d is not identifiable from one wall time; it is
 * learned from answers that give it (streams, engine-measured durations) and kept here.
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
