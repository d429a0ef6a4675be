import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { CompletionReport, RequestInfo } from '../../../types.js';
import { newBackendState, type Flight } from './backend-state.js';
import { Rates } from './rates.js';
import { Sizing } from './sizing.js';

const near = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-9, `${a} ≈ ${b}`);
const req = (id: string, chars: number, maxTokens?: number): RequestInfo => ({
  id,
  model: 'm',
  api: 'ollama',
  arrivedAt: 0,
  promptText: 'x'.repeat(chars),
  maxTokens,
});
const sizing = (outputLength: 'prior' | 'learned' = 'prior') =>
  new Sizing({ defaultOutputTokens: 128, initialTokensPerChar: 0.25, outputLength }, new Rates(0.001, 0.05));
const flightOf = (s: Sizing, r: RequestInfo): Flight => {
  const promptTokens = s.promptTokensOf(r);
  const predicted = s.predictOf(r, promptTokens);
  return {
    dispatchedAt: 0,
    promptTokens,
    prefillTokens: promptTokens,
    cachedTokens: 0,
    model: r.model,
    maxTokens: r.maxTokens,
    expectedOut: predicted,
    predictedAtPush: predicted,
    ver: s.outputVersion,
    ahead: 0,
    area0: 0,
  };
};
const answered = (promptTokens: number, completionTokens: number): CompletionReport => ({
  ok: true,
  dispatchedAt: 0,
  finishedAt: 1000,
  promptTokens,
  completionTokens,
});

test('sizing: prompt tokens from characters, at the ratio answers report', () => {
  const s = sizing();
  assert.equal(s.promptTokensOf(req('a', 400)), 100);
  assert.equal(s.promptTokensOf(req('a', 0)), 1);
  const r = req('a', 400);
  s.observe(r, flightOf(s, r), answered(200, 10));
  assert.equal(s.promptTokensOf(req('b', 400)), 200);
});

test('sizing: predictions start at the default, capped by the client; flights are re-predicted as it learns', () => {
  const s = sizing();
  assert.equal(s.predictOf(req('a', 400), 100), 128);
  assert.ok(s.predictOf(req('a', 400, 50), 100) <= 50);
  const early = flightOf(s, req('early', 400));
  assert.equal(s.expectedOf(early), 128);
  for (let i = 0; i < 20; i++) {
    const r = req(`r${i}`, 400);
    s.observe(r, flightOf(s, r), answered(100, 10));
  }
  assert.notEqual(s.outputVersion, early.ver);
  const now = s.expectedOf(early);
  assert.ok(now < 64, `re-predicted toward the answers seen: ${now}`);
  assert.equal(early.ver, s.outputVersion);
});

test('sizing: HRRN sizes — the priors with nothing measured, the best backend after; sizesOf agrees with sizeOf', () => {
  const s = sizing();
  near(s.sizeOf(100, 128, undefined), 100 * 0.001 + 128 * 0.05);
  const slow = newBackendState('slow', 0.1);
  const fast = newBackendState('fast', 0.1);
  for (const [b, k] of [
    [slow, 4],
    [fast, 1],
  ] as const) {
    b.prefill.update(100, 0.1 * k);
    b.decode.update(1, 0.01 * k);
    b.lastSampleAt = 1;
  }
  const rates = new Rates(0.001, 0.05);
  const reqs = [req('a', 400), req('b', 4000), req('c', 40_000, 16), req('d', 400)];
  const out = new Float64Array(reqs.length);
  s.sizesOf(reqs, out, [slow, fast]);
  reqs.forEach((r, i) => {
    const tokens = s.promptTokensOf(r);
    const predicted = s.predictOf(r, tokens);
    assert.equal(out[i], s.sizeOf(tokens, predicted, rates.bestCost([slow, fast], tokens, predicted)));
  });
  assert.equal(out[0], out[3], 'the same prompt length, the same size');
  // Memoised: asked again, the same; one at a time, the same.
  const again = new Float64Array(reqs.length);
  s.sizesOf(reqs, again, [slow, fast]);
  assert.deepEqual(again, out);
  assert.equal(s.size(reqs[1]!, [slow, fast]), out[1]);
  // The fast backend gone, sizes grow (bestCost sees only the slow one).
  s.noteBackendRemoved();
  assert.ok(s.size(reqs[1]!, [slow]) > out[1]!);
});

test('sizing: the HRRN epoch moves early, then every sixteenth of growth, and when a backend leaves', () => {
  const s = sizing();
  const e0 = s.epoch;
  s.noteLearned();
  assert.equal(s.epoch, e0 + 1);
  let bumps = 0;
  for (let i = 0; i < 200; i++) {
    const before = s.epoch;
    s.noteLearned();
    if (s.epoch !== before) bumps++;
  }
  assert.ok(bumps > 10 && bumps < 100, `${bumps} bumps in 200 completions`);
  const e1 = s.epoch;
  s.noteBackendRemoved();
  assert.equal(s.epoch, e1 + 1);
});

test('sizing: outputLength learned predicts once per request, until it ends', () => {
  const s = sizing('learned');
  const r = req('a', 400);
  const first = s.predictOf(r, 100);
  for (let i = 0; i < 5; i++) {
    const o = req(`o${i}`, 400);
    s.observe(o, flightOf(s, o), answered(100, 3));
  }
  assert.equal(s.predictOf(r, 100), first, 'kept for the request');
  s.forget('a');
  assert.equal(typeof s.predictOf(r, 100), 'number');
});
