import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultProfile } from '../engine/profile.js';
import type { EngineProfile } from '../engine/types.js';
import type { Scenario } from '../scenario/types.js';
import type { ClientDriver, ScheduledRequest } from '../workloads/types.js';
import { renderSvg, writeCharts } from '../report/charts.js';
import { resultsJson } from '../report/results.js';
import { exhaustiveOracle } from './oracle.js';
import { runSimulateCommand, simResults } from './command.js';
import { simulate } from './simulator.js';

/** One iteration = 1 s / speed, nothing else costs: hand-computable. */
const unit = (speed: number, over: Partial<EngineProfile> = {}): EngineProfile =>
  defaultProfile({ slots: 1, speed, baseStepS: 1, perSeqS: 0, perTokenS: 0, prefillPerTokenS: 0, prefixCacheBlocks: 0, ...over });

function scenario(
  reqs: ScheduledRequest[],
  fleet: { name: string; profile: EngineProfile }[],
  graceS = 1000,
  durationS = 1000,
): Scenario {
  return {
    name: 'in-code',
    seed: 1,
    durationS,
    graceS,
    timeScale: 1,
    policies: [{ name: 'round-robin' }],
    fleet: fleet.map((b) => ({ ...b, models: ['m'], maxConcurrency: Infinity, weight: 1 })),
    createDriver: (): ClientDriver => ({ start: () => reqs, onFinish: () => [] }),
  };
}

const req = (id: string, at: number, outputTokens: number, prompt = 'x'.repeat(400)): ScheduledRequest => ({
  at,
  request: { id, model: 'm', api: 'ollama-generate', prompt, outputTokens },
});

test('oracle: 3 one-token requests at t=0, A twice as fast as B → best 5/3 s, worst 4 s', () => {
  // Slots 1, one iteration each: on A a request takes 1 s, on B 2 s; a backend serves them in turn.
  // All on A: 1,2,3 → 2.  Two on A, one on B: 1,2,2 → 5/3 (best).  One on A, two on B: 1,2,4 → 7/3.
  // All on B: 2,4,6 → 4 (worst).
  const sc = scenario(
    [req('r0', 0, 1), req('r1', 0, 1), req('r2', 0, 1)],
    [
      { name: 'A', profile: unit(1) },
      { name: 'B', profile: unit(0.5) },
    ],
  );
  const o = exhaustiveOracle(sc, { seed: 1 });
  assert.equal(o.evaluated, 8);
  assert.ok(Math.abs(o.best.meanLatencyS - 5 / 3) < 1e-9, String(o.best.meanLatencyS));
  assert.equal(o.best.assignment.filter((b) => b === 'A').length, 2);
  assert.ok(Math.abs(o.worst.meanLatencyS - 4) < 1e-9);
  assert.deepEqual(o.worst.assignment, ['B', 'B', 'B']);
});

test('the same seed gives byte-identical results.json; policies differ', () => {
  const reqs = Array.from({ length: 60 }, (_, i) => req(`r${i}`, i * 0.2, 5 + ((i * 7) % 40), 'p'.repeat(100 + ((i * 131) % 2000))));
  const sc = scenario(reqs, [
    { name: 'a', profile: defaultProfile({ slots: 2 }) },
    { name: 'b', profile: defaultProfile({ slots: 2, speed: 0.3 }) },
  ]);
  const run = (policies: string[]): string =>
    resultsJson(simResults(sc, 1, policies.map((p) => simulate(sc, { name: p }, { seed: 1 }))));
  const one = run(['round-robin', 'random', 'estimated-wait']);
  assert.equal(run(['round-robin', 'random', 'estimated-wait']), one);
  const parsed = JSON.parse(one) as { policies: { latencyS: { mean: number } }[] };
  assert.notEqual(parsed.policies[0]!.latencyS.mean, parsed.policies[2]!.latencyS.mean);
  const otherSeed = resultsJson(simResults(sc, 2, [simulate(sc, { name: 'random' }, { seed: 2 })]));
  assert.notEqual(JSON.parse(otherSeed).policies[0].latencyS.mean, parsed.policies[1]!.latencyS.mean);
});

test('conservation: a KV too small and a grace too short lose nothing', () => {
  const reqs = Array.from({ length: 40 }, (_, i) => req(`r${i}`, i * 0.1, 50, 'k'.repeat(4000)));
  // 40 prompts of 1000 tokens, a KV that holds one at a time, sends over 4 s and 5 s of grace.
  const sc = scenario(reqs, [{ name: 'tiny', profile: defaultProfile({ slots: 8, kvCapacityTokens: 1500 }) }], 5, 4);
  const r = simulate(sc, { name: 'least-connections' }, { seed: 1 });
  const completed = r.records.filter((x) => x.ok === true).length;
  const failed = r.records.filter((x) => x.ok === false).length;
  const open = r.records.filter((x) => x.ok === undefined).length;
  assert.equal(r.records.length, 40);
  assert.equal(completed + failed + open, 40);
  assert.ok(completed > 0 && open > 0, `${completed} completed, ${open} unfinished`);
  const res = simResults(sc, 1, [r]).policies[0]!;
  assert.equal(res.sent, 40);
  assert.equal(res.completed, completed);
  assert.ok(res.completionRate < 1);
});

test('charts render as SVG with the policies named', async () => {
  const reqs = Array.from({ length: 10 }, (_, i) => req(`r${i}`, i, 3));
  const sc = scenario(reqs, [{ name: 'a', profile: unit(1) }]);
  const runs = ['round-robin', 'least-connections'].map((p) => simulate(sc, { name: p }, { seed: 1 }));
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-charts-'));
  const files = await writeCharts(dir, 'test', runs.map((r) => ({ policy: r.policy, records: r.records, samples: r.samples })));
  assert.equal(files.length, 5);
  for (const f of files) {
    const svg = readFileSync(join(dir, f), 'utf8');
    assert.match(svg, /^<svg/);
    assert.match(svg, /round-robin/);
    assert.match(svg, /least-connections/);
  }
  assert.match(
    await renderSvg({ data: { values: [{ x: 1 }] }, mark: 'point', encoding: { x: { field: 'x', type: 'quantitative' } } }),
    /<svg/,
  );
});

test('simulate command on the shipped small scenario prints the oracle line and writes results.json', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-sim-'));
  const writes: string[] = [];
  const orig = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((s: string) => (writes.push(String(s)), true)) as typeof process.stdout.write;
  try {
    const res = await runSimulateCommand({ scenarioPath: 'scenarios/small-exhaustive.yaml', outDir: dir, charts: false });
    assert.equal(res.policies.length, 2);
    assert.ok(res.policies.every((p) => p.completed === 8));
  } finally {
    process.stdout.write = orig;
  }
  const out = writes.join('');
  assert.match(out, /oracle \(256 assignments\): best mean latency [\d.]+ s, worst [\d.]+ s/);
  assert.match(readFileSync(join(dir, 'results.json'), 'utf8'), /"scenario": "small-exhaustive"/);
  await assert.rejects(runSimulateCommand({ scenarioPath: 'scenarios/small-exhaustive.yaml', policies: ['nope'], outDir: dir }), /unknown policy 'nope'/);
});
