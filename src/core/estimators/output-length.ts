import { Ema } from './guard.js';

/**
 * Online output-length prediction: an EMA of answer lengths per model and prompt-length bucket
 * (powers of two), falling back to the model's overall EMA, then to a default. Answers depend on
 * the task more than on anything the router sees, but prompt length is a cheap, real signal
 * (the performance-aware router: task types differ in both). A later predictor can replace this behind `predict`.
 *
 * Answers cut at the client's cap (num_predict / max_tokens) are censored: they say the natural
 * length was at least the cap, not what it was. They are kept out of the length EMAs and counted
 * instead in a per-model share of capped answers, which weighs the cap into the prediction. Where
 * clients cap every answer at the length they want (Heimdall's workload.py), predicting
 * min(EMA, cap) would keep the default forever: nothing uncapped is ever seen (issue #20).
 */
/** What the predictor learned for one model. */
interface ModelStats {
  /** Length EMA per prompt-length bucket (index: the bucket). */
  readonly byBucket: (Ema | undefined)[];
  /** Length EMA over every bucket. */
  readonly overall: Ema;
  /** Share of capped requests whose answer reached the cap (EMA of 0/1). */
  readonly capHit: Ema;
}

export class OutputLengthPredictor {
  /**
   * Per model, everything it learned: one lookup per prediction (predictions are made for every
   * request in flight after each answer, so a key built per call cost more than the rest).
   */
  private readonly byModel = new Map<string, ModelStats>();
  /** The last model looked up (traffic is mostly one model: no hashing then). */
  private lastModel: string | undefined;
  private lastStats: ModelStats | undefined;
  private observed = 0;

  constructor(
    private readonly fallback: number,
    private readonly alpha = 0.1,
  ) {}

  /** Answers learned from: a prediction made earlier may be stale once this has moved. */
  get version(): number {
    return this.observed;
  }

  /** floor(log2(promptTokens)), 0 at or below 1. */
  private static bucket(promptTokens: number): number {
    if (promptTokens <= 1) return 0;
    // An integer count (the common case) needs no logarithm; the same value as Math.log2 gives.
    if (promptTokens < 2 ** 31 && (promptTokens | 0) === promptTokens) return 31 - Math.clz32(promptTokens);
    return Math.floor(Math.log2(promptTokens));
  }

  private stats(model: string): ModelStats | undefined {
    if (model === this.lastModel) return this.lastStats;
    const s = this.byModel.get(model);
    if (s !== undefined) {
      this.lastModel = model;
      this.lastStats = s;
    }
    return s;
  }

  predict(model: string, promptTokens: number, maxTokens: number | undefined): number {
    const s = this.stats(model);
    const v =
      s?.byBucket[OutputLengthPredictor.bucket(promptTokens)]?.value ?? s?.overall.value ?? this.fallback;
    const n = Math.max(1, v);
    if (maxTokens === undefined || !(maxTokens > 0)) return n;
    const natural = Math.min(n, maxTokens);
    const hit = s?.capHit.value;
    // Expected length: the cap with the probability answers reach it, the natural length otherwise.
    return hit === undefined ? natural : hit * maxTokens + (1 - hit) * natural;
  }

  /** A completed answer of `outputTokens`, asked with cap `maxTokens` (if any). */
  observe(model: string, promptTokens: number, outputTokens: number, maxTokens?: number): void {
    if (!(outputTokens > 0) || !Number.isFinite(outputTokens)) return;
    this.observed++;
    let s = this.stats(model);
    if (s === undefined) {
      s = { byBucket: [], overall: new Ema(this.alpha), capHit: new Ema(this.alpha) };
      this.byModel.set(model, s);
    }
    const capped = maxTokens !== undefined && maxTokens > 0;
    if (capped) {
      const reached = outputTokens >= maxTokens;
      s.capHit.update(reached ? 1 : 0);
      if (reached) return; // censored: a lower bound on the natural length, not a sample of it
    }
    const bucket = OutputLengthPredictor.bucket(promptTokens);
    let e = s.byBucket[bucket];
    if (!e) s.byBucket[bucket] = e = new Ema(this.alpha);
    e.update(outputTokens);
    s.overall.update(outputTokens);
  }
}
