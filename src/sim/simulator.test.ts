import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BackendView, CompletionReport, Policy } from '../core/types.js';
import { defaultProfile } from '../engine/profile.js';
import type { EngineProfile } from '../engine/types.js';
import { writeCharts } from '../report/charts.js';
import { resultsJson } from '../report/results.js';
import type { Scenario } from '../scenario/types.js';
import type { ClientDriver, ScheduledRequest, WorkloadRequest } from '../workloads/types.js';
import { simResults } from '../commands/simulate.js';
import { simulate, simulateWith, type RunResult } from './simulator.js';

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
  fleet: { name: string; profile: EngineProfile; models?: string[]; maxConcurrency?: number }[],
  graceS = 1000,
  durationS = 1000,
  onFinish: ClientDriver['onFinish'] = () => [],
): Scenario {
  return {
    name: 'in-code',
    seed: 1,
    durationS,
    graceS,
    timeScale: 1,
    policies: [{ name: 'round-robin' }],
    fleet: fleet.map((b) => ({ models: ['m'], maxConcurrency: Infinity, weight: 1, ...b })),
    createDriver: (): ClientDriver => ({ start: () => reqs, onFinish }),
  };
}

const req = (
  id: string,
  at: number,
  outputTokens: number,
  prompt = 'x'.repeat(400),
  extra: Partial<WorkloadRequest> = {},
): ScheduledRequest => ({
  at,
  request: { id, model: 'm', api: 'ollama-generate', prompt, outputTokens, ...extra },
});

function counts(r: RunResult): { completed: number; failed: number; open: number } {
  return {
    completed: r.records.filter((x) => x.ok === true).length,
    failed: r.records.filter((x) => x.ok === false).length,
    open: r.records.filter((x) => x.ok === undefined).length,
  };
}

test('the same seed gives byte-identical results.json; policies and seeds differ', () => {
  const reqs = Array.from({ length: 60 }, (_, i) =>
    req(`r${i}`, i * 0.2, 5 + ((i * 7) % 40), 'p'.repeat(100 + ((i * 131) % 2000))),
  );
  const sc = scenario(reqs, [
    { name: 'a', profile: defaultProfile({ slots: 2 }) },
    { name: 'b', profile: defaultProfile({ slots: 2, speed: 0.3 }) },
  ]);
  const run = (policies: string[], seed = 1): string =>
    resultsJson(
      simResults(
        sc,
        seed,
        policies.map((p) => simulate(sc, { name: p }, { seed })),
      ),
    );
  const one = run(['round-robin', 'random', 'estimated-wait']);
  assert.equal(run(['round-robin', 'random', 'estimated-wait']), one);
  const parsed = JSON.parse(one) as { policies: { latencyS: { mean: number } }[] };
  assert.notEqual(parsed.policies[0]!.latencyS.mean, parsed.policies[2]!.latencyS.mean);
  const otherSeed = JSON.parse(run(['random'], 2)) as typeof parsed;
  assert.notEqual(otherSeed.policies[0]!.latencyS.mean, parsed.policies[1]!.latencyS.mean);
});

test('conservation: a KV too small and a grace too short lose nothing', () => {
  const reqs = Array.from({ length: 40 }, (_, i) => req(`r${i}`, i * 0.1, 50, 'k'.repeat(4000)));
  // 40 prompts of 1000 tokens, a KV that holds one at a time, sends over 4 s and 5 s of grace.
  const sc = scenario(
    reqs,
    [{ name: 'tiny', profile: defaultProfile({ slots: 8, kvCapacityTokens: 1500 }) }],
    5,
    4,
  );
  const r = simulate(sc, { name: 'least-connections' }, { seed: 1 });
  const c = counts(r);
  assert.equal(r.records.length, 40);
  assert.equal(c.completed + c.failed + c.open, 40);
  assert.ok(c.completed > 0 && c.open > 0, `${c.completed} completed, ${c.open} unfinished`);
  // Cut off at durationS + graceS: that is how long the run was.
  assert.equal(r.simulatedS, 9);
  // KV holds one 1000-token prompt: the engine never ran two at once.
  assert.ok(r.samples.every((s) => s.running <= 1));
  assert.ok(r.samples.some((s) => s.engineWaiting > 0));
  const res = simResults(sc, 1, [r]).policies[0]!;
  assert.equal(res.sent, 40);
  assert.equal(res.completed, c.completed);
  assert.equal(res.unfinished, c.open);
  assert.equal(res.sent, res.completed + res.failed + res.unfinished);
  assert.ok(res.completionRate < 1);
});

test('conservation: requests nobody serves are rejected and counted failed', () => {
  const reqs = [req('ok', 0, 1), { at: 0.5, request: { ...req('x', 0.5, 1).request, model: 'unserved' } }];
  const r = simulate(scenario(reqs, [{ name: 'a', profile: unit(1) }]), { name: 'round-robin' }, { seed: 1 });
  assert.deepEqual(counts(r), { completed: 1, failed: 1, open: 0 });
  const x = r.records.find((q) => q.id === 'x')!;
  assert.equal(x.failure, 'no-backend');
  assert.equal(x.finishS, 0.5);
});

test('a client timeout cancels the request in the router and the engine and counts it failed', () => {
  // Slots 1, 1 s per token. 'long' (10 tokens) times out at 3 s and leaves the batch; the iteration
  // then in progress [3, 4) keeps its end (its cost is spent), so 'next' (sent at 1 s, waiting in the
  // engine) is admitted at 4 s and finishes at 6 s. 'held' waits in the engine and times out at 2.5 s.
  const sc = scenario(
    [
      req('long', 0, 10, 'x'.repeat(400), { timeoutS: 3 }),
      req('next', 1, 2),
      req('held', 1.5, 1, 'x'.repeat(400), { timeoutS: 1 }),
    ],
    [{ name: 'a', profile: unit(1) }],
  );
  const r = simulate(sc, { name: 'round-robin' }, { seed: 1 });
  const by = new Map(r.records.map((x) => [x.id, x]));
  assert.equal(by.get('long')!.ok, false);
  assert.equal(by.get('long')!.failure, 'client-timeout');
  assert.equal(by.get('long')!.finishS, 3);
  assert.equal(by.get('next')!.ok, true);
  assert.equal(by.get('next')!.finishS, 6);
  assert.equal(by.get('held')!.failure, 'client-timeout');
  assert.equal(by.get('held')!.finishS, 2.5);

  // A router cap of 1 holds 'held' in the router queue; it times out there at 2 s.
  const capped = scenario(
    [
      req('long', 0, 10, 'x'.repeat(400), { timeoutS: 3 }),
      req('held', 1, 1, 'x'.repeat(400), { timeoutS: 1 }),
    ],
    [{ name: 'a', profile: unit(1), maxConcurrency: 1 }],
  );
  const rc = simulate(capped, { name: 'round-robin' }, { seed: 1, sampleEveryS: 0.5 });
  const held = rc.records.find((x) => x.id === 'held')!;
  assert.equal(held.dispatchS, undefined, 'held in the router queue, never dispatched');
  assert.equal(held.failure, 'client-timeout');
  assert.ok(rc.routerSamples.some((s) => s.queued === 1));
});

test('requests arriving at the same instant batch into one iteration', () => {
  // Slots 4, 1 s per iteration, 2 tokens each: together they take 2 iterations and all finish at 2 s.
  const sc = scenario(
    [req('a', 0, 2), req('b', 0, 2), req('c', 0, 2)],
    [{ name: 'e', profile: unit(1, { slots: 4 }) }],
  );
  const r = simulate(sc, { name: 'round-robin' }, { seed: 1 });
  assert.deepEqual(
    r.records.map((x) => x.finishS),
    [2, 2, 2],
  );
  assert.deepEqual(
    r.records.map((x) => x.firstTokenS),
    [1, 1, 1],
  );
  // An arrival exactly at an iteration boundary joins the iteration starting then.
  const sc2 = scenario([req('a', 0, 2), req('b', 1, 1)], [{ name: 'e', profile: unit(1, { slots: 4 }) }]);
  const r2 = simulate(sc2, { name: 'round-robin' }, { seed: 1 });
  assert.deepEqual(
    r2.records.map((x) => x.finishS),
    [2, 2],
  );
});

test('closed-loop follow-ups are sent after a finish, never after durationS', () => {
  let n = 0;
  const sc = scenario(
    [req('q0', 0, 1)],
    [{ name: 'a', profile: unit(1) }],
    100,
    5,
    (_id, now) => [req(`q${++n}`, now + 0.5, 1)], // think time 0.5 s
  );
  const r = simulate(sc, { name: 'round-robin' }, { seed: 1 });
  // q0 ends at 1, q1 sent 1.5 ends 2.5, q2 3→4, q3 4.5→5.5, q4 at 6 ≥ durationS: not sent.
  assert.deepEqual(
    r.records.map((x) => [x.id, x.arrivalS, x.finishS]),
    [
      ['q0', 0, 1],
      ['q1', 1.5, 2.5],
      ['q2', 3, 4],
      ['q3', 4.5, 5.5],
    ],
  );
  // The run ends with its last event, not after the grace period.
  assert.equal(r.simulatedS, 5.5);
});

test('the core sees milliseconds, engine metrics at the probe interval, and Ollama-like completion reports', () => {
  const reports: CompletionReport[] = [];
  const seen: { now: number; metrics: BackendView['metrics'] }[] = [];
  const spy: Policy = {
    name: 'spy',
    pick(_req, candidates, now) {
      seen.push({ now, metrics: candidates[0]!.metrics });
      return candidates[0]!;
    },
    onComplete(_req, _b, report) {
      reports.push(report);
    },
  };
  const profile = unit(1, { prefillPerTokenS: 0.01, slots: 2 });
  const sc = scenario([req('a', 0, 3), req('b', 2, 1)], [{ name: 'e', profile }]);
  const r = simulateWith(sc, spy, 'spy', { seed: 1, probeEveryS: 0.5 });
  assert.equal(seen[0]!.now, 0);
  assert.equal(seen[1]!.now, 2000);
  // At 2 s the latest probe is the one of 1.5 s (the 2 s probe runs after that instant's arrivals): 1 running.
  assert.equal(seen[1]!.metrics?.running, 1);
  assert.equal(seen[1]!.metrics?.at, 1500);
  // 'a' (a 100-token prompt at 0.01 s/token): admitted at 0, prefill of 100 tokens makes its first iteration 1 + 1 = 2 s, then 2 more
  // iterations; 'b' joins the iteration starting at 2 s (prefill 1 s): iteration [2, 4): both get a
  // token; 'b' is done at 4 s, 'a' finishes at 5 s.
  const a = reports.find((x) => x.finishedAt === 5000)!;
  assert.deepEqual(a, {
    ok: true,
    dispatchedAt: 0,
    firstByteAt: 2000,
    finishedAt: 5000,
    promptTokens: 100,
    completionTokens: 3,
    promptEvalMs: 2000,
    evalMs: 3000,
    // What the engine found in its prefix cache, as vLLM reports it (usage cached_tokens).
    cachedTokens: 0,
  });
  const b = r.records.find((x) => x.id === 'b')!;
  assert.equal(b.finishS, 4);
  assert.equal(b.firstTokenS, 4);
});

test('charts render as SVG with the policies named', async () => {
  const reqs = Array.from({ length: 10 }, (_, i) => req(`r${i}`, i, 3));
  const sc = scenario(reqs, [{ name: 'a', profile: unit(1) }]);
  const runs = ['round-robin', 'least-connections'].map((p) => simulate(sc, { name: p }, { seed: 1 }));
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-charts-'));
  const files = await writeCharts(
    dir,
    'test',
    runs.map((r) => ({
      policy: r.policy,
      records: r.records,
      samples: r.samples,
      routerSamples: r.routerSamples,
    })),
  );
  assert.deepEqual(files, [
    'latency-cdf.svg',
    'cumulative-throughput.svg',
    'completion-rate.svg',
    'cumulative-mean-wait.svg',
    'queue-per-backend.svg',
  ]);
  for (const f of files) {
    const svg = readFileSync(join(dir, f), 'utf8');
    assert.match(svg, /^<svg/);
    assert.match(svg, /round-robin/);
    assert.match(svg, /least-connections/);
  }
});

test('a policy that asks for faster engine metrics (SP-P) is probed at its interval', () => {
  const seen: number[] = [];
  const spy: Policy = {
    name: 'spy',
    traits: { metricsIntervalMs: 100 },
    pick(_req, candidates) {
      seen.push(candidates[0]!.metrics?.at ?? -1);
      return candidates[0]!;
    },
  };
  const profile = unit(1, { prefillPerTokenS: 0.01, slots: 2 });
  const sc = scenario([req('a', 0, 3), req('b', 2, 1)], [{ name: 'e', profile }]);
  // Asked for 0.5 s probes, but the policy wants 100 ms: at 2 s the latest probe is the one of 1.9 s.
  simulateWith(sc, spy, 'spy', { seed: 1, probeEveryS: 0.5 });
  assert.ok(Math.abs(seen[1]! - 1900) < 1e-6, `latest probe at ${seen[1]}`);
});

test("a policy that reads no metrics and never holds is not probed, and its results are a probed run's", () => {
  // Three engines of different speeds, requests of varied lengths at irregular times: busy batches.
  const reqs = Array.from({ length: 60 }, (_, i) =>
    req(`r${i}`, ((i * 7) % 23) / 4 + i / 10, 1 + ((i * 13) % 17), 'x'.repeat(40 + ((i * 29) % 300))),
  );
  const profile = (speed: number) => unit(speed, { slots: 3, perTokenS: 0.001, prefillPerTokenS: 0.002 });
  const sc = scenario(reqs, [
    { name: 'a', profile: profile(1) },
    { name: 'b', profile: profile(2) },
    { name: 'c', profile: profile(3) },
  ]);
  const spy = (readsMetrics: boolean | undefined): { policy: Policy; seen: unknown[] } => {
    const seen: unknown[] = [];
    let next = 0;
    const policy: Policy = {
      name: 'spy',
      traits: readsMetrics === false ? { readsMetrics, holds: false } : { readsMetrics },
      pick(_req, candidates) {
        seen.push(candidates[0]!.metrics);
        return candidates[next++ % candidates.length]!;
      },
    };
    return { policy, seen };
  };
  const free = spy(false);
  const probed = spy(undefined);
  const opts = { seed: 1, probeEveryS: 0.05 };
  const a = simulateWith(sc, free.policy, 'spy', opts);
  const b = simulateWith(sc, probed.policy, 'spy', opts);
  assert.ok(free.seen.every((m) => m === undefined));
  assert.ok(probed.seen.some((m) => m !== undefined));
  assert.deepEqual(a, b);
  // Lazy wakes too: the built-in round robin (readsMetrics false) against the same picks probed.
  const rr = simulate(sc, { name: 'round-robin' }, opts);
  assert.deepEqual({ ...rr, policy: 'spy' }, b);
});

test('selective pushing on pending requests keeps the queue in the router, not in the engines', () => {
  // 12 requests at once on two one-slot engines, lengths alternating: blind round-robin sends 6 to
  // each engine, where 5 wait while one runs; SP-P lets an engine hold at most the one it runs plus one pushed since the
  // last probe, and the rest wait in the router queue until an engine reports room.
  const reqs = Array.from({ length: 12 }, (_, i) => req(`r${i}`, 0, i % 2 === 0 ? 2 : 6));
  const sc = scenario(reqs, [
    { name: 'a', profile: unit(1) },
    { name: 'b', profile: unit(1) },
  ]);
  const maxWaiting = (r: RunResult) => Math.max(...r.samples.map((s) => s.engineWaiting));
  const maxQueued = (r: RunResult) => Math.max(...r.routerSamples.map((s) => s.queued));
  const blind = simulate(sc, { name: 'round-robin' }, { seed: 1, sampleEveryS: 0.25 });
  const spp = simulate(
    sc,
    { name: 'round-robin', params: { push: 'sp-p' } },
    { seed: 1, sampleEveryS: 0.25 },
  );
  assert.equal(counts(blind).completed, 12);
  assert.equal(counts(spp).completed, 12);
  assert.ok(maxWaiting(blind) >= 5, `blind: engine waiting up to ${maxWaiting(blind)}`);
  assert.equal(maxQueued(blind), 0);
  assert.ok(maxWaiting(spp) <= 1, `engine waiting up to ${maxWaiting(spp)}`);
  assert.ok(maxQueued(spp) >= 8, `router queue up to ${maxQueued(spp)}`);
  // Work goes where capacity frees up: the engine with the short requests takes more of them.
  const served = (r: RunResult, b: string) => r.records.filter((x) => x.backend === b).length;
  assert.ok(served(spp, 'a') !== served(spp, 'b'), 'SP-P adapts to unequal request lengths');
});
