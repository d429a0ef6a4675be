/**
 * `npm run bench:live-vs-sim` (issue #17): one scenario's policy comparison simulated and then run
 * live (`llmlb bench`: emulated engines time-scaled, real HTTP through a fresh router per policy),
 * side by side: each policy's mean and p90 E2E, and its mean E2E relative to the first policy (round
 * robin), simulated vs live. Goal: within 10 %. The live run shares one process (client, router,
 * engines) and this machine with whatever else runs: its event-loop delay and the load average are
 * printed with the figures.
 *
 * Env: LVS_SCENARIO (scenarios/mixed-4x.yaml), LVS_POLICIES (round-robin,workload-aware),
 * LVS_TIME_SCALE (the scenario's), LVS_SEED (the scenario's).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { runBenchCommand } from '../src/commands/bench.js';
import { runSimulateCommand } from '../src/commands/simulate.js';
import type { PolicyResult } from '../src/report/results.js';
import { formatTable } from '../src/report/table.js';

const scenarioPath = process.env.LVS_SCENARIO ?? 'scenarios/mixed-4x.yaml';
const policies = (process.env.LVS_POLICIES ?? 'round-robin,workload-aware').split(',');
const timeScale = process.env.LVS_TIME_SCALE ? Number(process.env.LVS_TIME_SCALE) : undefined;
const seed = process.env.LVS_SEED ? Number(process.env.LVS_SEED) : undefined;
const GOAL = 0.1;

const pct = (x: number): string => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)} %`;
const load = (): string =>
  loadavg()
    .map((x) => x.toFixed(1))
    .join(' ');

const loadBefore = load();
const sim = await runSimulateCommand({
  scenarioPath,
  policies,
  seed,
  outDir: 'bench-out/live-vs-sim/sim',
  charts: false,
  quiet: true,
});
const live = await runBenchCommand({
  scenarioPath,
  policies,
  seed,
  timeScale,
  outDir: 'bench-out/live-vs-sim/live',
  charts: false,
  quiet: false,
});
const loadAfter = load();

const s0 = sim.policies[0] as PolicyResult;
const l0 = live.policies[0] as PolicyResult;
const rows: string[][] = [];
let worst = 0;
for (let i = 0; i < policies.length; i++) {
  const s = sim.policies[i] as PolicyResult;
  const l = live.policies[i] as PolicyResult;
  const dMean = (l.latencyS.mean - s.latencyS.mean) / s.latencyS.mean;
  const rs = s.latencyS.mean / s0.latencyS.mean;
  const rl = l.latencyS.mean / l0.latencyS.mean;
  // The ratio's live/sim difference, relative (a −22 % gain that becomes −20 % is 2.6 % off).
  const dRatio = (rl - rs) / rs;
  worst = Math.max(worst, Math.abs(dMean), Math.abs(dRatio));
  rows.push([
    s.name,
    `${s.completed}/${l.completed}`,
    `${s.latencyS.mean.toFixed(2)} / ${l.latencyS.mean.toFixed(2)}`,
    pct(dMean),
    `${s.latencyS.p90.toFixed(2)} / ${l.latencyS.p90.toFixed(2)}`,
    pct((l.latencyS.p90 - s.latencyS.p90) / s.latencyS.p90),
    `${rs.toFixed(3)} / ${rl.toFixed(3)}`,
    pct(dRatio),
  ]);
}
const table = formatTable(
  [
    'policy',
    'done sim/live',
    'mean E2E s sim / live',
    'Δ',
    'p90 E2E s sim / live',
    'Δ',
    `mean ÷ ${s0.name} sim / live`,
    'Δ',
  ],
  rows,
);
const lines = [
  `${sim.scenario} (seed ${sim.seed}): simulated vs live; Δ = (live − sim) / sim`,
  '',
  table,
  '',
  `worst |Δ| of mean E2E and of the ratio to ${s0.name}: ${pct(worst)} (goal ≤ ${GOAL * 100} %) ${worst <= GOAL ? 'PASS' : 'MISS'}`,
  `load average (1/5/15 min) before ${loadBefore}, after ${loadAfter}`,
];
process.stdout.write(lines.join('\n') + '\n');
mkdirSync('bench-out/live-vs-sim', { recursive: true });
writeFileSync('bench-out/live-vs-sim/summary.txt', lines.join('\n') + '\n');
