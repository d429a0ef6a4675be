import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runBenchCommand } from '../src/commands/bench.js';
import { runLive, scaledPushParams } from '../src/live-bench/live.js';
import { defaultProfile } from '../src/engine/profile.js';
import type { Scenario } from '../src/scenario/types.js';
import { runSimulateCommand } from '../src/commands/simulate.js';

test('live bench over HTTP agrees with the simulation on the small scenario', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-bench-'));
  const opts = {
    scenarioPath: 'scenarios/small-exhaustive.yaml',
    policies: ['least-connections'],
    charts: false,
  };
  const sim = await runSimulateCommand({ ...opts, outDir: join(dir, 'sim'), oracle: false, quiet: true });
  const live = await runBenchCommand({ ...opts, outDir: join(dir, 'live'), timeScale: 2, quiet: true });
  const s = sim.policies[0]!;
  const l = live.policies[0]!;
  assert.equal(l.sent, 8);
  assert.equal(l.completed, 8);
  assert.equal(live.mode, 'bench');
  // Same requests, same engine model, real HTTP and timers: mean latency within 25 %. Time is
  // compressed only 2× so timer slack on a busy 2-core machine stays small beside step times.
  assert.ok(
    Math.abs(l.latencyS.mean - s.latencyS.mean) / s.latencyS.mean < 0.25,
    `${l.latencyS.mean} vs ${s.latencyS.mean}`,
  );
  // Both sample outstanding requests per instance over time (live: the engines' running + waiting).
  assert.ok(s.outstandingSpread !== null && s.outstandingSpread.samples > 0);
  assert.ok(l.outstandingSpread !== null && l.outstandingSpread.samples > 0);
  assert.notEqual(l.outstandingSpread.pending, null);
  assert.ok(l.outstandingSpread.mean > 0 && l.outstandingSpread.mean <= 8);
});

test('a client timeout in the workload is counted failed live, as in the simulator', async () => {
  const scenario: Scenario = {
    name: 'timeouts',
    seed: 1,
    durationS: 10,
    graceS: 60,
    timeScale: 10,
    policies: [{ name: 'round-robin' }],
    fleet: [
      {
        name: 'one',
        profile: defaultProfile({ slots: 1, baseStepS: 0.05, perSeqS: 0, perTokenS: 0, prefillPerTokenS: 0 }),
        models: ['m'],
        maxConcurrency: Infinity,
        weight: 1,
      },
    ],
    createDriver: () => ({
      start: () => [
        {
          at: 0,
          request: { id: 'long', model: 'm', api: 'ollama-generate', prompt: 'x', outputTokens: 100 },
        },
        {
          at: 0.1,
          request: {
            id: 'impatient',
            model: 'm',
            api: 'ollama-generate',
            prompt: 'y',
            outputTokens: 5,
            timeoutS: 1,
          },
        },
      ],
      onFinish: () => [],
    }),
  };
  const run = await runLive(scenario, { name: 'round-robin' }, { seed: 1, timeScale: 10 });
  const byId = new Map(run.records.map((r) => [r.id, r]));
  assert.equal(byId.get('long')?.ok, true);
  assert.equal(byId.get('impatient')?.ok, false);
  assert.equal(byId.get('impatient')?.timedOut, true);
});

test('a live SP-P run probes engines as often in model time as the simulator does', () => {
  const spp = { name: 'prefix-trie', params: { push: 'sp-p' } };
  assert.deepEqual(scaledPushParams(spp, 5), { push: 'sp-p', probeIntervalMs: 10 });
  assert.deepEqual(scaledPushParams(spp, 3), { push: 'sp-p', probeIntervalMs: 17 });
  assert.deepEqual(scaledPushParams(spp, 1), { push: 'sp-p' }, 'real time: as configured');
  const given = { name: 'prefix-trie', params: { push: 'sp-p', probeIntervalMs: 40 } };
  assert.deepEqual(scaledPushParams(given, 5), given.params, 'a scenario that sets it keeps it');
  assert.deepEqual(scaledPushParams({ name: 'round-robin' }, 5), {});
  assert.deepEqual(scaledPushParams({ name: 'prefix-trie', params: { push: 'sp-o' } }, 5), { push: 'sp-o' });
});
