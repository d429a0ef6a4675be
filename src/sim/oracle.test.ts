import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultProfile } from '../engine/profile.js';
import type { EngineProfile } from '../engine/types.js';
import type { Scenario } from '../scenario/types.js';
import type { ClientDriver, ScheduledRequest } from '../workloads/types.js';
import { assignmentCount, exhaustiveOracle, ORACLE_LIMIT } from './oracle.js';

/** One iteration = 1 s / speed, nothing else costs: hand-computable. */
const unit = (speed: number, over: Partial<EngineProfile> = {}): EngineProfile =>
  defaultProfile({
    slots: 1,
    speed,
    baseStepS: 1,
    perSeqS: 0,
    perTokenS: 0,
    prefillPerTokenS: 0,
    prefixCacheBlocks: 0,
    ...over,
  });

function scenario(
  reqs: ScheduledRequest[],
  fleet: { name: string; profile: EngineProfile; maxConcurrency?: number }[],
  onFinish: ClientDriver['onFinish'] = () => [],
): Scenario {
  return {
    name: 'in-code',
    seed: 1,
    durationS: 1000,
    graceS: 1000,
    timeScale: 1,
    policies: [{ name: 'round-robin' }],
    fleet: fleet.map((b) => ({ models: ['m'], maxConcurrency: Infinity, weight: 1, ...b })),
    createDriver: (): ClientDriver => ({ start: () => reqs, onFinish }),
  };
}

const req = (id: string, at: number, outputTokens: number): ScheduledRequest => ({
  at,
  request: { id, model: 'm', api: 'ollama-generate', prompt: 'x'.repeat(400), outputTokens },
});

const near = (a: number, b: number): boolean => Math.abs(a - b) < 1e-9;

test('oracle: 3 one-token requests at t=0, A twice as fast as B → best 5/3 s, worst 4 s', () => {
  // Slots 1, one iteration per request: on A a request takes 1 s, on B 2 s; a backend serves its
  // requests one after another. Latencies by how many go to A:
  //   3 on A: 1, 2, 3 → mean 2.        2 on A, 1 on B: 1, 2, 2 → 5/3 (best; 3 such assignments).
  //   1 on A, 2 on B: 1, 2, 4 → 7/3.   3 on B: 2, 4, 6 → 4 (worst).
  // Expected over all 8: (2 + 3·5/3 + 3·7/3 + 4) / 8 = 2.25.
  // A cap of 1 on A would hold requests in the router; the oracle pushes on arrival regardless.
  const sc = scenario(
    [req('r0', 0, 1), req('r1', 0, 1), req('r2', 0, 1)],
    [
      { name: 'A', profile: unit(1), maxConcurrency: 1 },
      { name: 'B', profile: unit(0.5) },
    ],
  );
  const o = exhaustiveOracle(sc, { seed: 1 });
  assert.equal(o.evaluated, 8);
  assert.equal(o.incomplete, 0);
  assert.equal(o.requests, 3);
  assert.ok(near(o.best.meanLatencyS, 5 / 3), String(o.best.meanLatencyS));
  // Ties go to the first in counting order (request 0 is the lowest digit: AAA, BAA, ABA, …).
  assert.deepEqual(o.best.assignment, ['B', 'A', 'A']);
  assert.ok(near(o.worst.meanLatencyS, 4));
  assert.deepEqual(o.worst.assignment, ['B', 'B', 'B']);
  assert.ok(near(o.randomMeanLatencyS, 2.25), String(o.randomMeanLatencyS));
});

test('oracle: arrivals spread in time — later requests see the earlier ones’ queue', () => {
  // Slots 1, 1 token each: A serves a request in 2 s, B in 3 s; r0 arrives at 0, r1 at 1.
  //   r0→A (0–2), r1→A (waits, 2–4): latencies 2, 3 → 2.5.   r0→A, r1→B (1–4): 2, 3 → 2.5.
  //   r0→B (0–3), r1→A (1–3): 3, 2 → 2.5.                     r0→B, r1→B (3–6): 3, 5 → 4.
  const sc = scenario(
    [req('r0', 0, 1), req('r1', 1, 1)],
    [
      { name: 'A', profile: unit(0.5) },
      { name: 'B', profile: unit(1 / 3) },
    ],
  );
  const o = exhaustiveOracle(sc, { seed: 1 });
  assert.ok(near(o.best.meanLatencyS, 2.5));
  assert.deepEqual(o.best.assignment, ['A', 'A']);
  assert.ok(near(o.worst.meanLatencyS, 4));
  assert.deepEqual(o.worst.assignment, ['B', 'B']);
});

test('oracle refuses more than 2^16 assignments and closed-loop workloads', () => {
  assert.equal(assignmentCount(2, 16), ORACLE_LIMIT);
  assert.equal(assignmentCount(2, 17), Infinity);
  assert.equal(assignmentCount(4, 1000), Infinity);
  const many = Array.from({ length: 17 }, (_, i) => req(`r${i}`, i, 1));
  const two = [
    { name: 'A', profile: unit(1) },
    { name: 'B', profile: unit(1) },
  ];
  assert.throws(
    () => exhaustiveOracle(scenario(many, two), { seed: 1 }),
    /2\^17 assignments .* over the limit of 65536/,
  );
  let k = 0;
  const closed = scenario([req('r0', 0, 1)], two, (_id, now) => (k++ < 2 ? [req(`f${k}`, now + 1, 1)] : []));
  assert.throws(() => exhaustiveOracle(closed, { seed: 1 }), /closed-loop/);
});
