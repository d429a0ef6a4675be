/**
 * `npm run bench:fidelity`: does the simulator agree with live runs? Each scenario is simulated
 * and then run live (emulated engines, time-scaled, real HTTP through the router) with the same
 * policies and seed; per policy the relative difference of mean latency, p90 latency and
 * throughput is printed. Goal: ≤ 10% each. Also the simulator's speed on mixed-4x (goal ≥ 1000×).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { runBenchCommand } from '../src/commands/bench.js';
import { formatTable } from '../src/report/table.js';
import type { PolicyResult } from '../src/report/results.js';
import { loadScenario } from '../src/scenario/load.js';
import { runSimulateCommand } from '../src/commands/simulate.js';
import { simulate } from '../src/sim/simulator.js';

const SCENARIOS = (process.env.FIDELITY_SCENARIOS ?? 'ollamarouter-2node,heimdall-burst,mixed-4x').split(',');
const POLICIES = ['round-robin', 'least-connections'];
const GOAL = 0.1;

const rel = (live: number, sim: number): number =>
  sim === 0 ? (live === 0 ? 0 : Infinity) : (live - sim) / sim;
const pct = (x: number): string => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`;

const rows: string[][] = [];
const summary: Record<string, unknown>[] = [];
let worst = 0;
for (const name of SCENARIOS) {
  const path = `scenarios/${name}.yaml`;
  const sim = await runSimulateCommand({
    scenarioPath: path,
    policies: POLICIES,
    outDir: `bench-out/fidelity/${name}/sim`,
    charts: false,
    quiet: true,
  });
  const t0 = performance.now();
  const live = await runBenchCommand({
    scenarioPath: path,
    policies: POLICIES,
    outDir: `bench-out/fidelity/${name}/live`,
    charts: false,
    quiet: true,
  });
  const liveWall = (performance.now() - t0) / 1000;
  for (let i = 0; i < POLICIES.length; i++) {
    const s = sim.policies[i] as PolicyResult;
    const l = live.policies[i] as PolicyResult;
    const d = {
      mean: rel(l.latencyS.mean, s.latencyS.mean),
      p90: rel(l.latencyS.p90, s.latencyS.p90),
      throughput: rel(l.throughputRps, s.throughputRps),
    };
    const m = Math.max(Math.abs(d.mean), Math.abs(d.p90), Math.abs(d.throughput));
    worst = Math.max(worst, m);
    rows.push([
      name,
      s.name,
      `${s.completed}/${l.completed}`,
      `${s.latencyS.mean.toFixed(2)} / ${l.latencyS.mean.toFixed(2)}`,
      pct(d.mean),
      `${s.latencyS.p90.toFixed(2)} / ${l.latencyS.p90.toFixed(2)}`,
      pct(d.p90),
      `${s.throughputRps.toFixed(4)} / ${l.throughputRps.toFixed(4)}`,
      pct(d.throughput),
      m <= GOAL ? 'PASS' : 'FAIL',
    ]);
    summary.push({ scenario: name, policy: s.name, sim: s, live: l, relDiff: d, liveWallS: liveWall });
  }
  process.stderr.write(`${name}: live runs took ${liveWall.toFixed(0)} s\n`);
}

// Speed: simulated seconds per wall second on mixed-4x, the reference scenario.
const mixed = loadScenario('scenarios/mixed-4x.yaml');
let simulated = 0;
const t1 = performance.now();
for (const p of ['round-robin', 'least-connections'])
  simulated += simulate(mixed, { name: p }, { seed: mixed.seed }).simulatedS;
const wall = (performance.now() - t1) / 1000;
const speed = simulated / wall;

process.stdout.write(
  [
    'simulation vs live (sim / live; relative difference = (live − sim) / sim)',
    '',
    formatTable(
      [
        'scenario',
        'policy',
        'done',
        'mean latency s',
        'Δ',
        'p90 latency s',
        'Δ',
        'throughput req/s',
        'Δ',
        `≤${GOAL * 100}%`,
      ],
      rows,
    ),
    '',
    `worst relative difference: ${pct(worst)} (goal ≤ ${GOAL * 100}%) ${worst <= GOAL ? 'PASS' : 'FAIL'}`,
    `simulator speed on mixed-4x: ${simulated.toFixed(0)} simulated s in ${wall.toFixed(2)} s = ${speed.toFixed(0)}× (goal ≥ 1000×) ${speed >= 1000 ? 'PASS' : 'FAIL'}`,
    '',
  ].join('\n'),
);
mkdirSync('bench-out', { recursive: true });
writeFileSync('bench-out/fidelity.json', JSON.stringify({ rows: summary, worst, speed }, null, 2) + '\n');
