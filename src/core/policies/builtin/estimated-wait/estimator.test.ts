import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView } from '../../../testing.js';
import type { RequestInfo } from '../../../types.js';
import { WaitEstimator } from './estimator.js';
import { parseEstimatedWaitParams } from './params.js';
import { estimatedWait } from './policy.js';

const near = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-9, `${a} ≈ ${b}`);
const req = (id: string, promptText: string): RequestInfo => ({
  id,
  model: 'm',
  api: 'ollama',
  arrivedAt: 0,
  promptText,
});
const estimator = (params: Record<string, unknown> = {}) =>
  new WaitEstimator(parseEstimatedWaitParams(params));
const views = () => [backendView('a', 0), backendView('b', 1)];

test('estimator: per candidate, the seconds until the request would finish there; load shows', () => {
  const e = estimator();
  const [a, b] = views();
  const out = new Float64Array(2);
  // Nothing measured: the priors (400 characters = 100 tokens × 1 ms, 128 tokens × 50 ms).
  e.estimates(req('q', 'x'.repeat(400)), [a!, b!], 0, out);
  near(out[0]!, 0.1 + 128 * 0.05);
  assert.equal(out[0], out[1]);
  assert.equal(e.decisions, 1);
  e.onDispatch(req('r1', 'y'.repeat(400)), a!, 0);
  e.estimates(req('q', 'x'.repeat(400)), [a!, b!], 0, out);
  assert.ok(out[0]! > out[1]!, `a has a request in flight: ${out[0]} vs ${out[1]}`);
  assert.equal(e.describe('a').inFlightTracked, 1);
  assert.deepEqual(e.describe('nobody'), {});
});

test('estimator: a backend sent the prompt’s prefix is costed its uncached prefill only', () => {
  const e = estimator();
  const [a, b] = views();
  const doc = Array.from({ length: 100 }, (_, i) => `paragraph ${i} of the document\n`).join('');
  e.onDispatch(req('turn1', doc), b!, 0);
  e.onComplete(
    req('turn1', doc),
    b!,
    { ok: true, dispatchedAt: 0, finishedAt: 100, promptTokens: doc.length / 4, completionTokens: 1 },
    100,
  );
  const out = new Float64Array(2);
  e.estimates(req('turn2', doc + 'and a question'), [a!, b!], 10_000, out);
  assert.equal(e.candCached[0], 0);
  assert.ok(e.candCached[1]! > 0);
  assert.ok(e.uncached[1]! < e.uncached[0]!);
  assert.ok(out[1]! < out[0]!, `b holds the prefix: ${out[1]} vs ${out[0]}`);
  e.onBackendRemoved('b');
  e.estimates(req('turn3', doc + 'another'), [a!, b!], 10_000, out);
  assert.equal(e.candCached[1], 0, 'forgotten with the backend');
});

test('estimator: the same estimates as the policy built on it, whatever it learned', () => {
  const e = estimator({ defaultSlots: 2 });
  const p = estimatedWait({ random: () => 0, params: { defaultSlots: 2 } });
  const bs = [backendView('a', 0), backendView('b', 1), backendView('c', 2)];
  let t = 0;
  for (let i = 0; i < 30; i++) {
    const r = req(`r${i}`, `${i}:`.padEnd(200 + 37 * i, 'z'));
    const v = bs[i % 3]!;
    e.onDispatch(r, v, t);
    p.onDispatch!(r, v, t);
    if (i % 2 === 1) {
      const rep = {
        ok: true,
        dispatchedAt: t - 500,
        finishedAt: t,
        promptTokens: 50 + i,
        completionTokens: 10 + i,
        promptEvalMs: 20 + i,
        evalMs: 100 + 7 * i,
      };
      e.onComplete(r, v, rep, t);
      p.onComplete!(r, v, rep, t);
    }
    t += 137;
  }
  const got = new Float64Array(3);
  const want = new Float64Array(3);
  e.estimates(req('q', 'question'.repeat(40)), bs, t, got);
  p.estimates(req('q', 'question'.repeat(40)), bs, t, want);
  assert.deepEqual(got, want);
  assert.deepEqual(e.describe('b'), p.describe!('b'));
});
