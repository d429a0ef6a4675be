import { HOLD } from '../../../types.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, scoresOf, chosen } from '../../../testing.js';
import { createPolicy } from '../../index.js';
import type { ProfilePolicy } from '../../framework/profile.js';
import { mixingScore, mixingTerms } from './mixing-impact-scorer.js';

const SEED = { grad1: 3.2e-4, grad2: 3.3e-5, epsilonS: 0.5, mixAlpha: 0.5 };
const close = (a: number, b: number): void => assert.ok(Math.abs(a - b) < 1e-12, `${a} != ${b}`);

test('Eq. 1–2 by hand: prompt impact over ε is penalised, decode impact grows with context', () => {
  // p_i = 40, d_i = 100, Σ(p_j + d_j) = 1000.
  const t = mixingTerms(40, 100, 1000, SEED);
  assert.equal(mixingScore(40, 100, 1000, SEED), t.r);
  assert.equal(mixingScore(20, 50, 9000, SEED), mixingTerms(20, 50, 9000, SEED).r);
  close(t.tp, 3.2e-4 * (1600 + 1000)); // 0.832 s > ε
  close(t.rp, 1 - 0.832 / 0.5); // −0.664
  close(t.rd, -3.3e-5 * (1000 + 40 + 100)); // −0.03762
  close(t.r, 0.5 * -0.664 + 0.5 * -0.03762); // −0.35081
  // Under ε the prompt term is 1; α weighs the two phases.
  const light = mixingTerms(20, 50, 0, { ...SEED, mixAlpha: 0.25 });
  close(light.tp, 3.2e-4 * 400);
  close(light.rp, 1);
  close(light.r, 0.25 * 1 + 0.75 * (-3.3e-5 * 70));
});

test('scorer: the backend holding fewer prompt + decode tokens scores 1, min–max scaled', () => {
  const s = makePlugin('scorer', 'mixing-impact-scorer');
  const a = backendView('a', 0);
  const b = backendView('b', 1);
  const c = backendView('c', 2);
  // 100 prompt tokens on a, 200 on c, nothing on b (dispatched now: no decode tokens yet).
  s.onDispatch!(requestInfo('r1', 'x'.repeat(400)), a, 0);
  s.onDispatch!(requestInfo('r2', 'x'.repeat(800)), c, 0);
  const scores = scoresOf(s, requestInfo('new', 'y'.repeat(80)), [a, b, c], 0);
  // r = 0.5·1 − 0.5·grad2·(Σ + 20 + d̂): linear in Σ (T_p stays under ε), so a sits at 100/200.
  [0.5, 1, 0].forEach((want, i) => assert.ok(Math.abs(scores[i]! - want) < 1e-9, `${scores[i]} != ${want}`));
  // What it tracks shows per backend (/admin/backends): in-flight tokens and classes.
  const d = s.describe!('a');
  assert.equal(d.inflightPromptTokens, 100);
  assert.equal(d.classLL! + d.classLH! + d.classHL! + d.classHH!, 1);
  // A completion removes the work (and teaches the predictor its answer length).
  s.onComplete!(
    requestInfo('r1', 'x'.repeat(400)),
    a,
    { ok: true, dispatchedAt: 0, finishedAt: 2000, completionTokens: 80 },
    2000,
  );
  assert.equal(s.describe!('a').inflightPromptTokens, 0);
  assert.equal(s.describe!('a').predictorSamples, 1);
});

test('request classes are per backend, from its learned speed (heavy decode ≥ 5 s)', () => {
  const s = makePlugin('scorer', 'mixing-impact-scorer', { heavyDecodeS: 5 });
  const fast = backendView('fast', 0);
  const slow = backendView('slow', 1);
  // Teach: 'slow' decodes at 0.1 s/token, 'fast' at 0.01 s/token; answers are ~100 tokens.
  for (let i = 0; i < 30; i++) {
    const r = requestInfo(`t${i}`, 'same prompt');
    s.onDispatch!(r, fast, 0);
    s.onComplete!(
      r,
      fast,
      { ok: true, dispatchedAt: 0, finishedAt: 1000, completionTokens: 100, evalMs: 990 },
      1000,
    );
    const q = requestInfo(`u${i}`, 'same prompt');
    s.onDispatch!(q, slow, 0);
    s.onComplete!(
      q,
      slow,
      { ok: true, dispatchedAt: 0, finishedAt: 10000, completionTokens: 100, evalMs: 9900 },
      10000,
    );
  }
  s.onDispatch!(requestInfo('x', 'same prompt'), fast, 0);
  s.onDispatch!(requestInfo('y', 'same prompt'), slow, 0);
  assert.equal(s.describe!('fast').classLL, 1); // ~100 tokens × 0.01 s = 1 s: light
  assert.equal(s.describe!('slow').classLH, 1); // ~100 tokens × 0.1 s = 10 s: heavy decode
});

test('composable in EndpointPickerConfig with kv-fit-filter; the built-ins build and hold', () => {
  const p = createPolicy('w', () => 0.5, {
    plugins: [
      { type: 'kv-fit-filter', parameters: { kvCapacityTokens: 1000 } },
      { type: 'mixing-impact-scorer', parameters: { mixAlpha: 0.3 } },
      { type: 'queue-scorer' },
      { type: 'max-score-picker' },
    ],
    schedulingProfiles: [
      {
        name: 'w',
        plugins: [
          { pluginRef: 'kv-fit-filter' },
          { pluginRef: 'mixing-impact-scorer', weight: 2 },
          { pluginRef: 'queue-scorer' },
          { pluginRef: 'max-score-picker' },
        ],
      },
    ],
  }) as ProfilePolicy;
  assert.deepEqual(p.currentWeights(), { 'mixing-impact-scorer': 2, 'queue-scorer': 1 });
  assert.throws(() => makePlugin('scorer', 'mixing-impact-scorer', { mixAlpha: 1 }), /mixAlpha/);

  // kv-fit-filter: a 3600-char (900-token) prompt does not fit beside 400 tokens in 1000: held.
  const wa = createPolicy(
    { name: 'workload-aware', params: { kvCapacityTokens: 1000, backfill: false } },
    () => 0.5,
  );
  const a = backendView('a', 0);
  const first = requestInfo('f', 'x'.repeat(1600));
  assert.equal(chosen(wa.pick(first, [a], 0))?.name, 'a');
  wa.onDispatch!(first, { ...a, inFlight: 1 }, 0);
  assert.equal(chosen(wa.pick(requestInfo('big', 'x'.repeat(3600), { maxTokens: 1 }), [a], 0)), undefined);
  // Small enough to fit: goes (maxTokens caps its predicted answer).
  assert.equal(chosen(wa.pick(requestInfo('small', 'x'.repeat(40), { maxTokens: 10 }), [a], 0))?.name, 'a');
  for (const name of ['jsq', 'max-capacity', 'min-min', 'workload-aware'])
    assert.equal(
      chosen(createPolicy(name, () => 0.5).pick(requestInfo('r', 'hi'), [a, backendView('b', 1)], 0))?.name,
      'a',
    );
  assert.throws(() => createPolicy({ name: 'jsq', params: { nope: 1 } }, () => 0.5), /nope/);
});

test('workload-aware: its memoised "fits nowhere" answer follows the candidates it is asked about', () => {
  const wa = createPolicy({ name: 'workload-aware', params: { kvCapacityTokens: 1000 } }, () => 0.5);
  const a = backendView('a', 0);
  const b = backendView('b', 1);
  const first = requestInfo('f', 'x'.repeat(1600));
  wa.onDispatch!(first, { ...a, inFlight: 1 }, 0);
  wa.onDispatch!(requestInfo('g', 'x'.repeat(1600)), { ...b, inFlight: 1 }, 0);
  const big = requestInfo('big', 'x'.repeat(3600), { maxTokens: 1 });
  // Same instant and tracker state: held on [a] and on [a, b] (both hold 400 tokens)...
  assert.equal(wa.pick(big, [a], 0), HOLD.untilChange); // kv-fit-filter backfills: each on its own
  assert.equal(chosen(wa.pick(big, [a, b], 0)), undefined);
  // ...but an idle backend takes it, whichever array it comes in.
  const c = backendView('c', 2);
  assert.equal(chosen(wa.pick(big, [a, c], 0))?.name, 'c');
  assert.equal(chosen(wa.pick(big, [a], 0)), undefined);
  // A completion frees a: it fits again.
  wa.onComplete!(first, a, { ok: true, dispatchedAt: 0, finishedAt: 10, completionTokens: 5 }, 10);
  assert.equal(chosen(wa.pick(big, [a, b], 10))?.name, 'a');
});
