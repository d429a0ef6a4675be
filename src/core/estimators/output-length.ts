import { Ema } from './guard.js';

/**
 * Online output-length prediction: an EMA of answer lengths per model and prompt-length bucket
 * (powers of two), falling back to the model's overall EMA, then to a default. Answers depend on
 * the task more than on anything the router sees, but prompt length is a cheap, real signal
 * (seed 004: task types differ in both). A later predictor can replace this behind `predict`.
 *
 * Answers cut at the client's cap (num_predict / max_tokens) are censored: they say the natural
 * length was at least the cap, not what it was. They are kept out of the length EMAs and counted
 * instead in a per-model share of capped answers, which weighs the cap into the prediction. Where
 * clients cap every answer at the length they want (seed 002's workload.py), predicting
 * min(EMA, cap) would keep the default forever: nothing uncapped is ever seen (issue #20).
 */
export class OutputLengthPredictor {
  private readonly byBucket = new Map<string, Ema>();
  private readonly byModel = new Map<string, Ema>();
  /** Per model: share of capped requests whose answer reached the cap (EMA of 0/1). */
  private readonly capHit = new Map<string, Ema>();
  private observed = 0;

  constructor(
    private readonly fallback: number,
    private readonly alpha = 0.1,
  ) {}

  /** Answers learned from: a prediction made earlier may be stale once this has moved. */
  get version(): number {
    return this.observed;
  }

  private static bucket(promptTokens: number): number {
    return promptTokens <= 1 ? 0 : Math.floor(Math.log2(promptTokens));
  }

  predict(model: string, promptTokens: number, maxTokens: number | undefined): number {
    const v =
      this.byBucket.get(`${model}\u0000${OutputLengthPredictor.bucket(promptTokens)}`)?.value ??
      this.byModel.get(model)?.value ??
      this.fallback;
    const n = Math.max(1, v);
    if (maxTokens === undefined || !(maxTokens > 0)) return n;
    const natural = Math.min(n, maxTokens);
    const hit = this.capHit.get(model)?.value;
    // Expected length: the cap with the probability answers reach it, the natural length otherwise.
    return hit === undefined ? natural : hit * maxTokens + (1 - hit) * natural;
  }

  /** A completed answer of `outputTokens`, asked with cap `maxTokens` (if any). */
  observe(model: string, promptTokens: number, outputTokens: number, maxTokens?: number): void {
    if (!(outputTokens > 0) || !Number.isFinite(outputTokens)) return;
    this.observed++;
    const capped = maxTokens !== undefined && maxTokens > 0;
    if (capped) {
      let h = this.capHit.get(model);
      if (!h) this.capHit.set(model, (h = new Ema(this.alpha)));
      const reached = outputTokens >= maxTokens;
      h.update(reached ? 1 : 0);
      if (reached) return; // censored: a lower bound on the natural length, not a sample of it
    }
    const key = `${model}\u0000${OutputLengthPredictor.bucket(promptTokens)}`;
    let e = this.byBucket.get(key);
    if (!e) this.byBucket.set(key, (e = new Ema(this.alpha)));
    e.update(outputTokens);
    let m = this.byModel.get(model);
    if (!m) this.byModel.set(model, (m = new Ema(this.alpha)));
    m.update(outputTokens);
  }
}
