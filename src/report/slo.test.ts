import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PolicyResult, Summary } from './results.js';
import { meetsSlo, parseSlo, recommend, SloError, type SizedRun } from './slo.js';

const summary = (x: number): Summary => ({ mean: x, min: x, p50: x, p90: x, p95: x, p99: x, max: x });
const run = (policy: string, replicas: number, ttft: number, done = 1): SizedRun => ({
  policy,
  replicas,
  result: {
    name: policy,
    sent: 10,
    completed: 10 * done,
    failed: 0,
    unfinished: 0,
    completionRate: done,
    makespanS: 1,
    throughputRps: 1,
    latencyS: summary(ttft * 2),
    ttftS: summary(ttft),
    prefixHitRate: null,
    outstandingSpread: null,
    perBackend: [],
  } satisfies PolicyResult,
});

test('parseSlo: terms in s or ms; a bad term is an SloError naming it', () => {
  assert.deepEqual(parseSlo('ttft-p90=1500ms, e2e-max=3'), [
    { metric: 'ttftS', stat: 'p90', limitS: 1.5, text: 'ttft-p90=1500ms' },
    { metric: 'latencyS', stat: 'max', limitS: 3, text: 'e2e-max=3' },
  ]);
  assert.throws(
    () => parseSlo('ttft=2s'),
    (e: unknown) => e instanceof SloError && /'ttft=2s'/.test(e.message),
  );
});

test('recommend: the fewest replicas where a policy meets the SLO, the best there; none; no SLO', () => {
  const runs = [run('a', 1, 5), run('b', 1, 3), run('a', 2, 1), run('b', 2, 0.5), run('c', 2, 0.1, 0.5)];
  const slo = parseSlo('ttft-p90=2s');
  assert.equal(meetsSlo(runs[4]!.result, slo), false, 'half the requests done never meets it');
  assert.deepEqual(recommend(runs, [1, 2], slo), {
    policy: 'b',
    replicas: 2,
    slo: 'ttft-p90=2s',
    reason: 'ttft p90 0.500 s',
  });
  assert.deepEqual(recommend(runs, [1, 2], parseSlo('ttft-p90=4s')), {
    policy: 'b',
    replicas: 1,
    slo: 'ttft-p90=4s',
    reason: 'ttft p90 3.000 s',
  });
  assert.equal(recommend(runs, [1, 2], parseSlo('ttft-p90=0.01s')), null);
  assert.equal(recommend(runs, [1, 2], [])?.policy, 'c', 'no SLO: best p90 TTFT at the most replicas');
});
