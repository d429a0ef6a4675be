import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Ema } from './guard.js';
import { OutputLengthPredictor } from './output-length.js';

/** The predictor as first written (an EMA per `model\0bucket` string key): the reference. */
class KeyedReference {
  private readonly byBucket = new Map<string, Ema>();
  private readonly byModel = new Map<string, Ema>();
  private readonly capHit = new Map<string, Ema>();
  constructor(private readonly fallback: number) {}
  private static bucket(t: number): number {
    return t <= 1 ? 0 : Math.floor(Math.log2(t));
  }
  predict(model: string, promptTokens: number, maxTokens: number | undefined): number {
    const v =
      this.byBucket.get(`${model}\u0000${KeyedReference.bucket(promptTokens)}`)?.value ??
      this.byModel.get(model)?.value ??
      this.fallback;
    const n = Math.max(1, v);
    if (maxTokens === undefined || !(maxTokens > 0)) return n;
    const natural = Math.min(n, maxTokens);
    const hit = this.capHit.get(model)?.value;
    return hit === undefined ? natural : hit * maxTokens + (1 - hit) * natural;
  }
  observe(model: string, promptTokens: number, outputTokens: number, maxTokens?: number): void {
    if (!(outputTokens > 0) || !Number.isFinite(outputTokens)) return;
    if (maxTokens !== undefined && maxTokens > 0) {
      let h = this.capHit.get(model);
      if (!h) this.capHit.set(model, (h = new Ema(0.1)));
      h.update(outputTokens >= maxTokens ? 1 : 0);
      if (outputTokens >= maxTokens) return;
    }
    const key = `${model}\u0000${KeyedReference.bucket(promptTokens)}`;
    let e = this.byBucket.get(key);
    if (!e) this.byBucket.set(key, (e = new Ema(0.1)));
    e.update(outputTokens);
    let m = this.byModel.get(model);
    if (!m) this.byModel.set(model, (m = new Ema(0.1)));
    m.update(outputTokens);
  }
}

const tokens = fc.oneof(
  fc.integer({ min: -2, max: 70_000 }),
  fc.constantFrom(0, 1, 2, 3, 4, 1023, 1024, 1025, 2 ** 31 - 1, 2 ** 31, 2 ** 40),
  fc.double({ min: 0, max: 5000, noNaN: true }),
);
const cap = fc.option(fc.integer({ min: -1, max: 600 }), { nil: undefined });

test('OutputLengthPredictor: the same predictions as the string-keyed reference', () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.tuple(
          fc.constantFrom('m1', 'm2', 'm3'),
          tokens,
          fc.integer({ min: 0, max: 900 }),
          cap,
          fc.boolean(),
        ),
        { maxLength: 120 },
      ),
      (steps) => {
        const p = new OutputLengthPredictor(128);
        const ref = new KeyedReference(128);
        for (const [model, prompt, out, max, learn] of steps) {
          assert.equal(p.predict(model, prompt, max), ref.predict(model, prompt, max));
          if (learn) {
            p.observe(model, prompt, out, max);
            ref.observe(model, prompt, out, max);
          }
        }
        for (const m of ['m1', 'm2', 'm3', 'm4'])
          for (const t of [0, 1, 2, 7, 8, 100, 5000, 2 ** 35])
            assert.equal(p.predict(m, t, undefined), ref.predict(m, t, undefined));
      },
    ),
    { numRuns: 300 },
  );
});

test('OutputLengthPredictor: buckets by powers of two of the prompt, then the model, then the default', () => {
  const p = new OutputLengthPredictor(50);
  assert.equal(p.predict('m', 100, undefined), 50);
  p.observe('m', 100, 10); // bucket 6 (64..127)
  assert.equal(p.predict('m', 64, undefined), 10);
  assert.equal(p.predict('m', 127.5, undefined), 10);
  assert.equal(p.predict('m', 128, undefined), 10, 'another bucket: the model overall');
  p.observe('m', 128, 30);
  assert.equal(p.predict('m', 255, undefined), 30);
  assert.equal(p.predict('m', 63, undefined), 10 * 0.9 + 30 * 0.1, 'the model EMA over both answers');
  assert.equal(p.predict('other', 100, undefined), 50);
  assert.equal(p.version, 2);
});
