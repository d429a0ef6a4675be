import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  oracleSummary,
  outstandingSpread,
  policyResult,
  resultsJson,
  summarize,
  type Results,
} from './results.js';

test('summarize covers min…max (nearest-rank percentiles; nothing is all zeros)', () => {
  assert.deepEqual(summarize([3, 1, 2]), { mean: 2, min: 1, p50: 2, p90: 3, p95: 3, p99: 3, max: 3 });
  assert.deepEqual(summarize([]), { mean: 0, min: 0, p50: 0, p90: 0, p95: 0, p99: 0, max: 0 });
  // Rounded to microseconds: float noise does not reach the file.
  assert.equal(summarize([0.1 + 0.2]).mean, 0.3);
});

test('policyResult: counts, makespan, throughput, wait = finish − arrival, ttft, busy time per backend', () => {
  const records = [
    { id: 'a', arrivalS: 1, dispatchS: 1, firstTokenS: 1.5, finishS: 3, backend: 'x', ok: true },
    { id: 'b', arrivalS: 2, dispatchS: 2.5, firstTokenS: 4, finishS: 5, backend: 'x', ok: true },
    { id: 'c', arrivalS: 2, dispatchS: 2, firstTokenS: 2.2, finishS: 9, backend: 'y', ok: true },
    { id: 'd', arrivalS: 3, finishS: 3, ok: false },
    { id: 'e', arrivalS: 4, dispatchS: 4, backend: 'y', ok: undefined },
  ];
  const r = policyResult('p', records, ['x', 'y', 'z'], { queries: 10, hits: 4 });
  assert.equal(r.sent, 5);
  assert.equal(r.completed, 3);
  assert.equal(r.failed, 1);
  assert.equal(r.unfinished, 1);
  assert.equal(r.completionRate, 0.6);
  assert.equal(r.makespanS, 8); // first arrival 1 → last finish 9
  assert.equal(r.throughputRps, 0.375);
  assert.deepEqual([r.latencyS.min, r.latencyS.p50, r.latencyS.max], [2, 3, 7]);
  assert.equal(r.latencyS.mean, 4);
  assert.deepEqual([r.ttftS.min, r.ttftS.max], [0.2, 2]);
  assert.equal(r.prefixHitRate, 0.4);
  assert.deepEqual(r.perBackend, [
    { name: 'x', requests: 2, busyS: 4, lastFinishS: 5 }, // [1,3] ∪ [2.5,5] = 4 s
    { name: 'y', requests: 1, busyS: 7, lastFinishS: 9 },
    { name: 'z', requests: 0, busyS: 0, lastFinishS: 0 },
  ]);
  assert.equal(policyResult('p', [], ['x'], { queries: 0, hits: 0 }).prefixHitRate, null);
});

test('resultsJson is stable: design §2 keys in a fixed order, same input → same bytes', () => {
  const mk = (): Results => ({
    scenario: 's',
    seed: 7,
    mode: 'simulate',
    policies: [
      policyResult('rr', [{ id: 'a', arrivalS: 0, finishS: 1, backend: 'x', ok: true }], ['x'], undefined),
    ],
    oracle: oracleSummary({
      evaluated: 4,
      best: { meanLatencyS: 1 / 3, assignment: ['x', 'y'] },
      worst: { meanLatencyS: 2, assignment: ['y', 'y'] },
      randomMeanLatencyS: 1.25,
    }),
  });
  const text = resultsJson(mk());
  assert.equal(resultsJson(mk()), text);
  assert.ok(text.endsWith('}\n'));
  const parsed = JSON.parse(text) as Results;
  assert.deepEqual(Object.keys(parsed), ['scenario', 'seed', 'mode', 'policies', 'oracle']);
  assert.deepEqual(Object.keys(parsed.policies[0]!), [
    'name',
    'sent',
    'completed',
    'failed',
    'unfinished',
    'completionRate',
    'makespanS',
    'throughputRps',
    'latencyS',
    'ttftS',
    'prefixHitRate',
    'outstandingSpread',
    'perBackend',
  ]);
  assert.equal(parsed.oracle?.bestMeanLatencyS, 0.333333);
});

test('outstandingSpread: per-instant gap, CV and peak/mean averaged over busy instants', () => {
  const at = (t: number, a: number, b: number, c?: number) => [
    { t, backend: 'a', outstanding: a },
    { t, backend: 'b', outstanding: b },
    ...(c === undefined ? [] : [{ t, backend: 'c', outstanding: c }]),
  ];
  // t=0: 6/2 (gap 4, mean 4, std 2, cv .5, peak 1.5); t=1: 3/3 (even); t=2: idle (skipped).
  const s = outstandingSpread([...at(0, 6, 2), ...at(1, 3, 3), ...at(2, 0, 0)], ['a', 'b']);
  assert.deepEqual(s, { samples: 2, mean: 3.5, maxMinusMin: 2, cv: 0.25, maxOverMean: 1.25, pending: null });
  // A backend absent from an instant counts as 0: all on one of three → peak/mean 3.
  const one = outstandingSpread([{ t: 0, backend: 'c', outstanding: 9 }], ['a', 'b', 'c']);
  assert.equal(one?.maxOverMean, 3);
  assert.equal(one?.maxMinusMin, 9);
  assert.equal(outstandingSpread(at(0, 0, 0), ['a', 'b']), null);
  assert.equal(outstandingSpread([{ t: 0, backend: 'a', outstanding: 3 }], ['a']), null);
  // Unknown backends are ignored, not counted as extra replicas.
  assert.deepEqual(
    outstandingSpread([...at(0, 2, 2), { t: 0, backend: 'zz', outstanding: 50 }], ['a', 'b']),
    {
      samples: 1,
      mean: 2,
      maxMinusMin: 0,
      cv: 0,
      maxOverMean: 1,
      pending: null,
    },
  );
  // Engine-waiting counts: mean per backend over the busy instants.
  const w = outstandingSpread(
    [
      { t: 0, backend: 'a', outstanding: 5, engineWaiting: 3 },
      { t: 0, backend: 'b', outstanding: 1, engineWaiting: 0 },
      { t: 1, backend: 'a', outstanding: 2, engineWaiting: 1 },
      { t: 1, backend: 'b', outstanding: 2, engineWaiting: 0 },
    ],
    ['a', 'b'],
  );
  assert.equal(w?.pending, 1);
  const r = policyResult('p', [], ['a', 'b'], undefined, at(0, 6, 2));
  assert.equal(r.outstandingSpread?.maxMinusMin, 4);
  assert.equal(policyResult('p', [], ['a', 'b'], undefined).outstandingSpread, null);
});
