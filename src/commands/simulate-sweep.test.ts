import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runSimulateCommand, UsageError, type SimulateResults } from './simulate.js';
import { parseRateScales } from './load-sweep.js';
import { captured } from './stdout.testing.js';

const SMALL = 'scenarios/small-exhaustive.yaml';
const POLICIES = ['round-robin', 'least-connections', 'estimated-wait'];

const quiet = captured;

/** results.json's policies without the names (a sweep names them policy@xK). */
const unnamed = (ps: SimulateResults['policies']): unknown[] =>
  ps.map(({ name: _n, ...p }) => {
    const { rateScale: _k, ...rest } = p as typeof p & { rateScale?: number };
    return rest;
  });

test('simulate --rate-scale: every policy at every load, ×1 equal to a plain run, capacity table and chart', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-sweep-'));
  const plain = await quiet(() =>
    runSimulateCommand({
      scenarioPath: SMALL,
      policies: POLICIES,
      outDir: join(dir, 'plain'),
      charts: false,
      oracle: false,
    }),
  );
  const { value: res, out } = await quiet(() =>
    runSimulateCommand({
      scenarioPath: SMALL,
      policies: POLICIES,
      outDir: join(dir, 'sweep'),
      rateScales: [4, 1, 2],
    }),
  );
  assert.deepEqual(
    res.policies.map((p) => p.name),
    [1, 2, 4].flatMap((k) => POLICIES.map((p) => `${p}@x${k}`)),
  );
  // ×1 is the plain run, figure for figure.
  assert.deepEqual(unnamed(res.policies.slice(0, 3)), unnamed(plain.value.policies));
  // ×k: the constant 1/s becomes k/s over the same 8 s: 8k requests, more load on the two instances.
  const sentAt = (k: number) => res.policies.filter((p) => p.name.endsWith(`@x${k}`)).map((p) => p.sent);
  assert.deepEqual(sentAt(1), [8, 8, 8]);
  assert.deepEqual(sentAt(2), [16, 16, 16]);
  assert.deepEqual(sentAt(4), [32, 32, 32]);
  const rr = (k: number) => res.policies.find((p) => p.name === `round-robin@x${k}`)!;
  assert.ok(rr(4).latencyS.mean > rr(1).latencyS.mean);
  const sweep = res.sweep!;
  assert.deepEqual(sweep.rateScales, [1, 2, 4]);
  assert.equal(sweep.points.length, 9);
  assert.equal(sweep.capacity.length, 3);
  assert.match(out, /load ×1: 8 requests\n.*policy +sent +done/);
  assert.match(out, /load ×4: 32 requests/);
  assert.match(out, /capacity \(each run against the best policy at its load\):\npolicy +load +sent/);
  assert.match(out, /where it breaks \(bar: completes ≥ 99 % and mean E2E ≤ 2× the best/);
  assert.match(out, /round-robin: (holds|breaks)/);
  assert.match(readFileSync(join(dir, 'sweep', 'capacity-curves.svg'), 'utf8'), /<svg[\s\S]*estimated-wait/);
  const json = JSON.parse(readFileSync(join(dir, 'sweep', 'results.json'), 'utf8')) as SimulateResults;
  assert.deepEqual(json.sweep?.rateScales, [1, 2, 4]);
  // No sweep asked: no sweep section, no rateScale.
  assert.equal(plain.value.sweep, undefined);
  assert.ok(!('rateScale' in plain.value));

  // On worker threads: the same results.
  const threaded = await quiet(() =>
    runSimulateCommand({
      scenarioPath: SMALL,
      policies: POLICIES,
      outDir: join(dir, 'threads'),
      rateScales: [1, 2, 4],
      threads: 3,
      charts: false,
    }),
  );
  assert.deepEqual(threaded.value.policies, res.policies);
  assert.deepEqual(threaded.value.sweep, res.sweep);
});

test('one multiple is a plain run at that load; a scenario rateScales key sweeps', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-sweep-'));
  const { value: one, out } = await quiet(() =>
    runSimulateCommand({
      scenarioPath: SMALL,
      policies: ['round-robin'],
      outDir: dir,
      rateScales: [3],
      charts: false,
    }),
  );
  assert.equal(one.sweep, undefined);
  assert.equal(one.rateScale, 3);
  assert.equal(one.policies[0]!.sent, 24);
  assert.match(out, /24 requests \(load ×3\)/);

  const text = readFileSync(SMALL, 'utf8').replace(
    /^policies: .*$/m,
    'policies: [round-robin]\nrateScales: [1, 1.5]',
  );
  const file = join(dir, 'swept.yaml');
  writeFileSync(file, text);
  const { value: swept } = await quiet(() =>
    runSimulateCommand({ scenarioPath: file, outDir: dir, charts: false }),
  );
  assert.deepEqual(
    swept.policies.map((p) => [p.name, p.sent]),
    [
      ['round-robin@x1', 8],
      ['round-robin@x1.5', 12],
    ],
  );
  // --rate-scale wins over the key.
  const { value: over } = await quiet(() =>
    runSimulateCommand({ scenarioPath: file, outDir: dir, charts: false, rateScales: [1] }),
  );
  assert.equal(over.sweep, undefined);

  writeFileSync(file, text.replace('rateScales: [1, 1.5]', 'rateScales: [0, 2]'));
  await assert.rejects(
    () => runSimulateCommand({ scenarioPath: file, outDir: dir, charts: false }),
    UsageError,
  );
  await assert.rejects(
    () => runSimulateCommand({ scenarioPath: SMALL, outDir: dir, charts: false, rateScales: [-1] }),
    /--rate-scale: load multiples must be positive numbers/,
  );
});

test('a trace sweeps k× faster within the same durationS; its file counts are printed once', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-sweep-'));
  const lines = Array.from({ length: 20 }, (_, i) =>
    JSON.stringify({ at: i, promptTokens: 20, outputTokens: 5 }),
  );
  writeFileSync(join(dir, 'tr.jsonl'), [...lines, 'not json'].join('\n') + '\n');
  const scenario = join(dir, 's.yaml');
  writeFileSync(
    scenario,
    'name: t\ndurationS: 10\nfleet:\n  - name: a\nworkload: { type: trace, path: tr.jsonl, skipBad: true }\npolicies: [round-robin]\n',
  );
  const { value, out } = await quiet(() =>
    runSimulateCommand({
      scenarioPath: scenario,
      outDir: join(dir, 'out'),
      charts: false,
      rateScales: [1, 2],
    }),
  );
  assert.deepEqual(
    value.policies.map((p) => [p.name, p.sent]),
    [
      ['round-robin@x1', 10],
      ['round-robin@x2', 20],
    ],
  );
  assert.equal(value.trace?.skippedLines, 1);
  assert.match(out, /trace \(llmlb\): 10 requests at ×1, skipped 1 bad lines/);
});

test('--rate-scale values: parsed, sorted and each once; 0, -1, abc, empty are usage errors (exit 2)', () => {
  assert.deepEqual(parseRateScales('4, 1,2,2 ,0.5'), [0.5, 1, 2, 4]);
  for (const bad of ['0', 'abc', '-1', '', '1,,2', '1,Infinity'])
    assert.throws(() => parseRateScales(bad), UsageError, bad);
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-sweep-'));
  for (const bad of ['0', 'abc', '-1', '']) {
    const r = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'src/cli.ts', 'simulate', SMALL, '--out', dir, `--rate-scale=${bad}`],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 2, `${bad}: ${r.stderr}`);
    assert.match(r.stderr, /--rate-scale/, bad);
  }
  assert.ok(!existsSync(join(dir, 'results.json')));
});
