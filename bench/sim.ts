/**
 * `npm run bench:sim`: the simulator's speed (issue #18: ≥ 100,000 simulated requests per
 * wall-clock second per policy on mixed-4x-sized work; a one-hour 20,000-request trace under 8
 * policies in ≤ 10 s, whole command).
 *  1. requests simulated per wall-clock second, per built-in policy, on scenarios/mixed-4x.yaml
 *     (2000 requests, 4 backends): each policy in a fresh process (compiled, bare node: as
 *     `llmlb whatif` runs one policy per worker), WARMUP runs, then REPEAT timed runs, ROUNDS
 *     processes, every run with its own seed (it builds its own workload); the median run and
 *     the best;
 *  2. `llmlb simulate --scenario scenarios/mixed-4x.yaml` (its 9 policies, table, results.json and
 *     charts), whole command as a user runs it: process start to exit;
 *  3. `llmlb whatif` on a 20,000-request one-hour Mooncake-shaped trace under 8 policies, whole
 *     command (trace check, simulation on worker threads, table, results.json, charts).
 * CPU time is printed beside wall time (a shared machine's load changes wall time more).
 *
 * Env: BENCH_SIM_POLICIES=a,b (part 1's policies; `name+sp-p` for a push mode), BENCH_SIM_REPEAT
 * (10), BENCH_SIM_WARMUP (3), BENCH_SIM_ROUNDS (2), BENCH_SIM_PARTS=1,2,3, BENCH_BASE=REV (part 1
 * also measures git revision REV, compiled the same way, alternating with this tree in the same
 * rounds, and prints this/base).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { percentile } from '../src/report/stats.js';
import { formatTable } from '../src/report/table.js';
import { mooncakeSample } from '../src/workloads/trace-samples.js';
import { compileForBench, exportRevision } from './build.js';
import { envInt } from './common.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BUILD = join(ROOT, 'bench-out', '.build-sim');
const BASE_BUILD = join(ROOT, 'bench-out', '.build-sim-base');
const SCENARIO = join(ROOT, 'scenarios', 'mixed-4x.yaml');

const REPEAT = envInt('BENCH_SIM_REPEAT', 10, 1);
const WARMUP = envInt('BENCH_SIM_WARMUP', 3, 0);
const ROUNDS = envInt('BENCH_SIM_ROUNDS', 2, 1);
const PARTS = new Set((process.env.BENCH_SIM_PARTS ?? '1,2,3').split(','));
const BASE_REV = process.env.BENCH_BASE;

/** mixed-4x's own list, then the other built-ins a user can name without parameters. */
const ALL_POLICIES = [
  'round-robin',
  'least-connections',
  'random',
  'jsq',
  'max-capacity',
  'min-min',
  'estimated-wait',
  'workload-aware',
  'rl',
  'weighted-round-robin',
  'ollama-router',
  'prefix-trie',
  'prefix-trie+sp-o',
  'prefix-trie+sp-p',
  'consistent-hash',
  'sglang-cache-aware',
  'sglang-cache-aware+sp-p',
];

const cpu = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

/** Compile `root`'s src/ and bench children into `out`, with the shipped rl weights beside them. */
async function compile(root: string, out: string): Promise<void> {
  await compileForBench(root, out);
  symlinkSync(join(ROOT, 'policies'), join(out, 'policies'));
  // The CLI reads its version from the package.json above src/.
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  writeFileSync(join(out, 'package.json'), JSON.stringify({ type: 'module', version }) + '\n');
}

/** Export `rev`'s src/ and bench/ with `git archive` and compile them into BASE_BUILD. */
async function compileBase(rev: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-bench-sim-base-'));
  try {
    await exportRevision(ROOT, rev, dir);
    await compile(dir, BASE_BUILD);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface ChildRun {
  requests: number[];
  wallMs: number[];
  cpuMs: number[];
}

/** One fresh process timing `policy` on the tree compiled into `build` (the child is always this tree's). */
function runChild(build: string, policy: string): ChildRun {
  const r = spawnSync(
    process.execPath,
    [
      join(BUILD, 'bench', 'sim-child.js'),
      join(build, 'src'),
      SCENARIO,
      policy,
      String(WARMUP),
      String(REPEAT),
    ],
    { encoding: 'utf8', maxBuffer: 1 << 24 },
  );
  if (r.status !== 0) throw new Error(`sim-child ${policy} failed (${r.status}): ${r.stderr.trim()}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as ChildRun;
}

const median = (xs: readonly number[]): number =>
  percentile(
    [...xs].sort((a, b) => a - b),
    0.5,
  );
const k = (x: number): string => (x >= 10_000 ? `${(x / 1000).toFixed(0)}k` : x.toFixed(0));

async function part1(): Promise<void> {
  await mkdir(join(ROOT, 'bench-out'), { recursive: true });
  await compile(ROOT, BUILD);
  if (BASE_REV !== undefined) await compileBase(BASE_REV);
  const only = process.env.BENCH_SIM_POLICIES?.split(',').filter((p) => p !== '');
  const policies = only ?? ALL_POLICIES;
  console.log(
    `1. mixed-4x (2000 requests, 4 backends): simulated requests per wall-clock second, each policy in ` +
      `${ROUNDS} fresh process(es) × ${REPEAT} timed runs after ${WARMUP} warm-up runs` +
      (BASE_REV !== undefined ? `; base = ${BASE_REV}, alternated in the same rounds` : ''),
  );
  const rows: string[][] = [];
  for (const policy of policies) {
    const mine: ChildRun[] = [];
    const base: ChildRun[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      mine.push(runChild(BUILD, policy));
      if (BASE_REV !== undefined) base.push(runChild(BASE_BUILD, policy));
    }
    // Per run: requests / time (each run has its own seed, so its own request count).
    const rates = (runs: ChildRun[], key: 'wallMs' | 'cpuMs'): number[] =>
      runs.flatMap((c) => c[key].map((ms, i) => (c.requests[i]! / ms) * 1000));
    const wall = rates(mine, 'wallMs');
    const med = median(wall);
    const row = [policy, k(med), k(Math.max(...wall)), k(median(rates(mine, 'cpuMs')))];
    if (BASE_REV !== undefined) {
      const bmed = median(rates(base, 'wallMs'));
      row.push(k(bmed), `${(med / bmed).toFixed(2)}×`);
    }
    rows.push(row);
    console.log(`   ${row.join('  ')}`);
  }
  const head = ['policy', 'req/s (median run)', 'req/s (best run)', 'req/CPU-s (median)'];
  if (BASE_REV !== undefined) head.push('base req/s', 'this/base');
  console.log(formatTable(head, rows));
}

async function part2(): Promise<void> {
  if (!PARTS.has('1')) {
    await mkdir(join(ROOT, 'bench-out'), { recursive: true });
    await compile(ROOT, BUILD);
  }
  const out = mkdtempSync(join(tmpdir(), 'llmlb-bench-sim-'));
  console.log('2. llmlb simulate --scenario scenarios/mixed-4x.yaml (9 policies, charts), whole command');
  const t0 = performance.now();
  const r = spawnSync(
    process.execPath,
    [join(BUILD, 'src', 'cli.js'), 'simulate', '--scenario', SCENARIO, '--out', out],
    { encoding: 'utf8', maxBuffer: 1 << 26 },
  );
  const wall = (performance.now() - t0) / 1000;
  if (r.status !== 0) throw new Error(`llmlb simulate failed (${r.status}): ${r.stderr.trim()}`);
  const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as {
    policies: { sent: number }[];
  };
  const sent = results.policies.reduce((a, p) => a + p.sent, 0);
  console.log(
    `   ${results.policies.length} policies, ${sent} requests: ${wall.toFixed(2)} s wall = ` +
      `${k(sent / wall)} requests per wall second, process start to exit`,
  );
  rmSync(out, { recursive: true, force: true });
}

async function part3(): Promise<void> {
  // Imported here: part 1 and 2 run compiled children only.
  const { runWhatifCommand } = await import('../src/commands/whatif.js');
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-bench-sim-'));
  const trace = join(dir, 'mooncake-1h.jsonl');
  writeFileSync(trace, mooncakeSample({ requests: 20_000, durationS: 3600, seed: 7 }));
  const config = join(dir, 'llmlb.yaml');
  writeFileSync(
    config,
    [
      'backends:',
      ...Array.from(
        { length: 8 },
        (_, i) => `  - { name: gpu-${i}, url: "http://127.0.0.1:${9000 + i}", models: [llama3] }`,
      ),
      'policy: least-connections',
    ].join('\n') + '\n',
  );
  const profile = join(dir, 'profile.yaml');
  // An H100-class replica for a 7B model: ~6x the default V100 profile's speed, batch 32.
  writeFileSync(profile, 'profile: { slots: 32, kvCapacityTokens: 200000, speed: 6 }\n');
  const policies = [
    'least-connections',
    'round-robin',
    'random',
    'jsq',
    'estimated-wait',
    'prefix-trie',
    'consistent-hash',
    'sglang-cache-aware',
  ];
  console.log(
    `3. llmlb whatif: 20,000-request one-hour trace, ${policies.length} policies, 8 replicas, ${availableParallelism()} cores`,
  );
  const t0 = performance.now();
  const c0 = cpu();
  const r = await runWhatifCommand({
    tracePath: trace,
    configPath: config,
    profilePath: profile,
    policies,
    outDir: join(dir, 'out'),
    quiet: true,
  });
  const wall = (performance.now() - t0) / 1000;
  console.log(
    `   ${r.policies.length} runs of ${r.trace.requests} requests: whole command ${wall.toFixed(2)} s wall ` +
      `(process CPU, workers included, ${(cpu() - c0).toFixed(2)} s), recommendation ${r.recommendation?.policy}`,
  );
  rmSync(dir, { recursive: true, force: true });
}

if (PARTS.has('1')) await part1();
if (PARTS.has('2')) await part2();
if (PARTS.has('3')) await part3();
