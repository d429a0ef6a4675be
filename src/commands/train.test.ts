import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPolicy } from '../core/policies/index.js';
import { loadScenario } from '../scenario/load.js';
import { simulate } from '../sim/simulator.js';
import { readRlWeights } from '../rl/weights-file.js';
import { train } from './train.js';

test('train: 2 tiny episodes on a tiny scenario write loadable weights and a learning curve', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-train-'));
  const scenario = join(dir, 'tiny.yaml');
  writeFileSync(
    scenario,
    [
      'name: tiny',
      'seed: 3',
      'durationS: 5',
      'graceS: 60',
      'defaults: { models: [m], profile: { slots: 8, kvCapacityTokens: 2048 } }',
      'fleet: [{ name: b, count: 2 }]',
      'workload: { type: task-mix, model: m, rate: 10, arrival: poisson, count: 30 }',
      'policies: [round-robin]',
    ].join('\n') + '\n',
  );
  const out = join(dir, 'policy.json');
  const r = await train({ scenarioPath: scenario, episodes: 2, out });
  assert.equal(r.stats.length, 2);
  for (const s of r.stats) {
    assert.equal(s.completed, 30);
    assert.ok(s.decisions >= 30 && Number.isFinite(s.totalReward) && s.meanE2eS > 0);
    // Each episode ends with a frozen greedy run on the held-out workload.
    assert.equal(s.evalCompleted, 30);
    assert.ok(s.evalMeanE2eS > 0);
  }
  // The weights kept are those of the best frozen evaluation, not of the best training episode.
  const best = r.stats.reduce((a, b) => (b.evalMeanE2eS < a.evalMeanE2eS ? b : a));
  assert.equal(r.keptEpisode, best.episode);
  assert.ok(r.roundRobinEvalMeanE2eS > 0);
  assert.ok(r.stats[1]!.epsilon < r.stats[0]!.epsilon, 'exploration decays');
  assert.ok(r.stats[1]!.guidance < r.stats[0]!.guidance, 'guidance decays');
  assert.match(readFileSync(r.svg, 'utf8'), /^<svg/);
  const doc = JSON.parse(readFileSync(out, 'utf8')) as {
    arch: string;
    backends: number;
    kvCapacityTokens: number;
    training: { keptEpisode: number };
  };
  assert.equal(doc.arch, 'shared-head');
  assert.equal(doc.training.keptEpisode, r.keptEpisode);
  assert.equal(doc.backends, 2);
  assert.equal(doc.kvCapacityTokens, 2048);
  // Loadable by file, and it routes every request of the scenario in the simulator.
  const policy = { name: 'rl', params: { file: out } };
  assert.equal(createPolicy(policy, Math.random, undefined, { rlWeights: readRlWeights }).name, 'rl');
  const run = simulate(loadScenario(scenario), policy, { seed: 1 });
  assert.equal(run.records.filter((x) => x.ok === true).length, 30);
  assert.ok(existsSync(join(dir, 'policy-curve.svg')));
});
