import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Results } from '../report/results.js';
import { choosePolicies, loadScenarioOrUsage, runSimulateCommand, UsageError } from './simulate.js';
import { policyLabel } from '../sim/simulator.js';
import { captured } from './stdout.testing.js';

const SMALL = 'scenarios/small-exhaustive.yaml';

test('simulate command on the shipped small scenario: table, oracle, results.json, charts', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-sim-'));
  const { value: res, out } = await captured(() => runSimulateCommand({ scenarioPath: SMALL, outDir: dir }));
  assert.equal(res.policies.length, 7); // the performance-aware router: round-robin … workload-aware
  assert.ok(res.policies.every((p) => p.completed === 8));
  assert.match(out, /policy +sent +done +failed +complete s +wait mean/);
  assert.match(out, /oracle: 256 assignments simulated; best inst-[01](,inst-[01]){7}/);
  assert.match(out, /oracle best +[\d.]+ +\+0\.0% +0\.0%/);
  assert.match(out, /speed: \d+ simulated s in [\d.]+ wall s = \d+× real time/);
  const text = readFileSync(join(dir, 'results.json'), 'utf8');
  const json = JSON.parse(text) as Results;
  assert.equal(json.scenario, 'small-exhaustive');
  assert.equal(json.oracle?.assignments, 256);
  const o = json.oracle;
  assert.ok(o.bestMeanLatencyS <= o.randomMeanLatencyS && o.randomMeanLatencyS <= o.worstMeanLatencyS);
  // No policy beats the physical limit.
  for (const p of json.policies) assert.ok(p.latencyS.mean >= o.bestMeanLatencyS - 1e-6, p.name);
  for (const f of [
    'latency-cdf.svg',
    'cumulative-throughput.svg',
    'completion-rate.svg',
    'cumulative-mean-wait.svg',
    'queue-per-backend.svg',
  ]) {
    assert.match(readFileSync(join(dir, f), 'utf8'), /round-robin/);
  }
  // Run again: byte-identical results.json.
  const dir2 = mkdtempSync(join(tmpdir(), 'llmlb-sim-'));
  await captured(() => runSimulateCommand({ scenarioPath: SMALL, outDir: dir2, charts: false }));
  assert.equal(readFileSync(join(dir2, 'results.json'), 'utf8'), text);
});

test('--policies overrides the scenario list; --oracle false skips it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-sim-'));
  const { value, out } = await captured(() =>
    runSimulateCommand({
      scenarioPath: SMALL,
      outDir: dir,
      policies: ['random', 'estimated-wait'],
      oracle: false,
      charts: false,
    }),
  );
  assert.deepEqual(
    value.policies.map((p) => p.name),
    ['random', 'estimated-wait'],
  );
  assert.equal(value.oracle, undefined);
  assert.doesNotMatch(out, /oracle/);
});

test('--threads: the policies on worker threads give the same results.json, charts and table', async () => {
  const one = mkdtempSync(join(tmpdir(), 'llmlb-sim-'));
  const two = mkdtempSync(join(tmpdir(), 'llmlb-sim-'));
  const a = await captured(() => runSimulateCommand({ scenarioPath: SMALL, outDir: one, threads: 1 }));
  const b = await captured(() => runSimulateCommand({ scenarioPath: SMALL, outDir: two, threads: 3 }));
  assert.doesNotMatch(a.out, /on \d+ threads/);
  assert.match(b.out, /\(7 policies on 3 threads\)/);
  for (const f of ['results.json', 'latency-cdf.svg', 'queue-per-backend.svg'])
    assert.equal(readFileSync(join(two, f), 'utf8'), readFileSync(join(one, f), 'utf8'), f);
  // The report (what the test runner wrote before it aside), less the wall-time line and where it wrote.
  const strip = (out: string, dir: string): string =>
    out
      .slice(out.indexOf('scenario small-exhaustive'))
      .replace(/^speed: .*$/m, '')
      .replaceAll(dir, 'DIR');
  assert.equal(strip(b.out, two), strip(a.out, one));
  await assert.rejects(runSimulateCommand({ scenarioPath: SMALL, outDir: one, threads: 0 }), /--threads/);
});

test('bad arguments are UsageErrors naming the problem', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-sim-'));
  await assert.rejects(
    runSimulateCommand({ scenarioPath: SMALL, policies: ['nope'], outDir: dir }),
    (err: Error) =>
      err instanceof UsageError &&
      /unknown policy 'nope'/.test(err.message) &&
      /round-robin/.test(err.message),
  );
  await assert.rejects(runSimulateCommand({ scenarioPath: SMALL, seed: -1, outDir: dir }), /--seed/);
  await assert.rejects(
    runSimulateCommand({ scenarioPath: 'scenarios/does-not-exist.yaml', outDir: dir }),
    UsageError,
  );
});

test('policy labels: a push mode reads as name+mode; --policies picks entries by label', () => {
  assert.equal(policyLabel({ name: 'prefix-trie', params: { push: 'sp-p' } }), 'prefix-trie+sp-p');
  assert.equal(
    policyLabel({ name: 'least-connections', params: { push: 'sp-o', maxOutstanding: 8 } }),
    'least-connections+sp-o(maxOutstanding=8)',
  );
  assert.equal(policyLabel({ name: 'pinned', params: { backend: 'fast' } }), 'pinned(backend="fast")');
  assert.equal(policyLabel({ name: 'x', params: { push: 3 } }), 'x(push=3)');
  const scenario = loadScenarioOrUsage(SMALL);
  const two = {
    ...scenario,
    policies: [
      { name: 'pinned', params: { backend: 'inst-0' } },
      { name: 'pinned', params: { backend: 'inst-1' } },
    ],
  };
  assert.deepEqual(choosePolicies(two, ['pinned(backend="inst-1")']), [
    { name: 'pinned', params: { backend: 'inst-1' } },
  ]);
  // A bare name keeps the first entry of that name (and its parameters).
  assert.deepEqual(choosePolicies(two, ['pinned']), [{ name: 'pinned', params: { backend: 'inst-0' } }]);
  // name+mode not listed → that policy with push: mode; an unknown policy is a usage error.
  assert.throws(() => choosePolicies(two, ['nope+sp-p']), UsageError);
});

test('a trace workload with skipBad: the skipped lines are printed and in results.json', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-sim-trace-'));
  writeFileSync(
    join(dir, 'tr.jsonl'),
    [
      '{"at": 0, "promptTokens": 20, "outputTokens": 5}',
      '{"at": 0.5, "promptTokens": -1, "outputTokens": 5}',
      'not json',
      '{"at": 1, "promptTokens": 30, "outputTokens": 5}',
    ].join('\n') + '\n',
  );
  const scenario = join(dir, 's.yaml');
  writeFileSync(
    scenario,
    'name: t\ndurationS: 10\nfleet:\n  - name: a\nworkload: { type: trace, path: tr.jsonl, skipBad: true }\npolicies: [round-robin]\n',
  );
  const out = join(dir, 'out');
  const { value: res, out: text } = await captured(() =>
    runSimulateCommand({ scenarioPath: scenario, outDir: out, charts: false }),
  );
  assert.equal(res.trace?.skippedLines, 2);
  assert.equal(res.trace?.requests, 2);
  assert.match(text, /trace \(llmlb\): 2 requests, skipped 2 bad lines \(first: .*tr\.jsonl:2: promptTokens/);
  const json = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as {
    trace?: { skippedLines: number };
  };
  assert.equal(json.trace?.skippedLines, 2);
  // Not a trace: no trace section.
  const plain = await captured(() =>
    runSimulateCommand({ scenarioPath: SMALL, outDir: join(dir, 'plain'), charts: false }),
  );
  assert.equal(plain.value.trace, undefined);
  assert.doesNotMatch(plain.out, /skipped/);
});
