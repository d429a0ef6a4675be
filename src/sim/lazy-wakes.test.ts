/**
 * simulate() wakes an engine only where its next iteration may finish, admit or preempt a
 * sequence (EngineModel.quietUntil), and replays a run waking every iteration when two engine
 * events meet at one instant. Either way the results must be exactly those of the reference
 * protocol (`everyIteration: true`).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultProfile } from '../engine/profile.js';
import type { EngineProfile } from '../engine/types.js';
import { loadScenario } from '../scenario/load.js';
import type { Scenario } from '../scenario/types.js';
import { mooncakeSample } from '../workloads/trace-samples.js';
import type { ClientDriver, ScheduledRequest } from '../workloads/types.js';
import { everyIterationReruns, simulate } from './simulator.js';
import { traceJobScenario } from './trace-job.js';

const same = (s: Scenario, name: string, params?: Record<string, unknown>): void => {
  const spec = params ? { name, params } : { name };
  const lazy = simulate(s, spec, { seed: 1 });
  const every = simulate(s, spec, { seed: 1, everyIteration: true });
  assert.deepEqual(lazy, every, `${s.name} under ${name}`);
};

test('shipped scenarios: lazy wakes give exactly the every-iteration results', () => {
  for (const f of ['small-exhaustive', 'trace-conversation-4x', 'ollamarouter-2node']) {
    const s = loadScenario(new URL(`../../scenarios/${f}.yaml`, import.meta.url).pathname);
    for (const p of s.policies) same(s, p.name, p.params);
  }
});

test('a Mooncake-shaped trace on 4 replicas (stall, chunked and mixed prefill; paged KV) matches', () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-lazy-'));
  const path = join(dir, 'trace.jsonl');
  writeFileSync(path, mooncakeSample({ requests: 400, durationS: 120, seed: 3 }));
  const variants: Partial<EngineProfile>[] = [
    { slots: 8, speed: 4 },
    { slots: 8, speed: 4, prefillMode: 'stall', pagedKv: true, kvCapacityTokens: 30000 },
    { slots: 8, speed: 4, prefillMode: 'chunked', maxBatchedTokens: 256 },
  ];
  for (const v of variants) {
    const profile = defaultProfile(v);
    const fleet = Array.from({ length: 4 }, (_, i) => ({
      name: `gpu-${i}`,
      profile,
      models: ['llama3'],
      maxConcurrency: Infinity,
      weight: 1,
    }));
    for (const name of ['least-connections', 'prefix-trie', 'estimated-wait']) {
      const s = traceJobScenario({
        trace: { path, model: 'llama3' },
        fleet,
        policy: { name },
        seed: 1,
        durationS: 121,
        graceS: 600,
      });
      same(s, name);
    }
  }
});

test('two engines in lockstep: the run is replayed waking every iteration, with the same results', () => {
  // Identical engines, identical requests at the same instants: their iterations end together.
  const profile = defaultProfile({ slots: 4, prefixCacheBlocks: 0 });
  const reqs: ScheduledRequest[] = [];
  for (let i = 0; i < 8; i++)
    reqs.push({
      at: Math.floor(i / 2),
      request: { id: `r${i}`, model: 'm', api: 'ollama-generate', prompt: 'x'.repeat(400), outputTokens: 30 },
    });
  const s: Scenario = {
    name: 'lockstep',
    seed: 1,
    durationS: 100,
    graceS: 100,
    timeScale: 1,
    policies: [{ name: 'round-robin' }],
    fleet: ['a', 'b'].map((name) => ({ name, profile, models: ['m'], maxConcurrency: Infinity, weight: 1 })),
    createDriver: (): ClientDriver => ({ start: () => reqs, onFinish: () => [] }),
  };
  const before = everyIterationReruns();
  same(s, 'round-robin');
  assert.ok(everyIterationReruns() > before, 'the lazy run met simultaneous engine events and was replayed');
});
