import { Ema } from './guard.js';

/**
 * Online output-length prediction: an EMA of answer lengths per model and prompt-length bucket
 * (powers of two), falling back to the model's overall EMA, then to a default. Answers depend on
 * the task more than on anything the router sees, but prompt length is a cheap, real signal
 * (seed 004: task types differ in both). A later predictor can replace this behind `predict`.
 */
export class OutputLengthPredictor {
  private readonly byBucket = new Map<string, Ema>();
  private readonly byModel = new Map<string, Ema>();

  constructor(
    private readonly fallback: number,
    private readonly alpha = 0.1,
  ) {}

  private static bucket(promptTokens: number): number {
    return promptTokens <= 1 ? 0 : Math.floor(Math.log2(promptTokens));
  }

  predict(model: string, promptTokens: number, maxTokens: number | undefined): number {
    const v =
      this.byBucket.get(`${model}\u0000${OutputLengthPredictor.bucket(promptTokens)}`)?.value ??
      this.byModel.get(model)?.value ??
      this.fallback;
    const n = Math.max(1, v);
    return maxTokens !== undefined && maxTokens > 0 ? Math.min(n, maxTokens) : n;
  }

  observe(model: string, promptTokens: number, outputTokens: number): void {
    if (!(outputTokens > 0) || !Number.isFinite(outputTokens)) return;
    const key = `${model}\u0000${OutputLengthPredictor.bucket(promptTokens)}`;
    let e = this.byBucket.get(key);
    if (!e) this.byBucket.set(key, (e = new Ema(this.alpha)));
    e.update(outputTokens);
    let m = this.byModel.get(model);
    if (!m) this.byModel.set(model, (m = new Ema(this.alpha)));
    m.update(outputTokens);
  }
}
