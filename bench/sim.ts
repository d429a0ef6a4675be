/**
 * `npm run bench:sim`: the simulator's speed.
 *  1. requests per wall-clock second per policy on scenarios/mixed-4x.yaml (2000 requests; every
 *     policy run once to warm up, then each timed over REPEAT runs);
 *  2. `llmlb whatif` on a 20,000-request one-hour Mooncake-shaped trace under 8 policies, whole
 *     command (trace check, simulation on worker threads, table, results.json, charts).
 * Also prints CPU time, since wall time on a shared machine depends on its load: per policy the
 * best run's CPU (one thread), and for whatif the whole process's (main thread and workers).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { runWhatifCommand } from '../src/commands/whatif.js';
import { loadScenario } from '../src/scenario/load.js';
import { simulate } from '../src/sim/simulator.js';
import { mooncakeSample } from '../src/workloads/trace-samples.js';

const REPEAT = Number(process.env.BENCH_SIM_REPEAT ?? 5);
const cpu = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

const scenario = loadScenario(new URL('../scenarios/mixed-4x.yaml', import.meta.url).pathname);
const only = process.env.BENCH_SIM_POLICIES?.split(',');
console.log(
  `1. ${scenario.name}: requests simulated per wall-clock second, per policy (best of ${REPEAT}; ` +
    'CPU: the best run by CPU time)',
);
const specs = scenario.policies.filter((p) => !only || only.includes(p.name));
// Warm up every policy first: the simulator and engine code they share is then compiled before
// any is timed (timed alone, the first policy measured carried the JIT's warm-up).
for (const spec of specs) simulate(scenario, spec, { seed: 1 });
for (const spec of specs) {
  let best = Infinity;
  let bestCpu = Infinity;
  let n = 0;
  for (let i = 0; i < REPEAT; i++) {
    const t0 = performance.now();
    const c0 = cpu();
    n = simulate(scenario, spec, { seed: 1 }).records.length;
    bestCpu = Math.min(bestCpu, cpu() - c0);
    best = Math.min(best, (performance.now() - t0) / 1000);
  }
  console.log(
    `   ${spec.name.padEnd(20)} ${n} requests in ${(best * 1000).toFixed(1)} ms = ${Math.round(n / best)} req/s` +
      ` (CPU ${(bestCpu * 1000).toFixed(1)} ms = ${Math.round(n / bestCpu)} req/CPU-s)`,
  );
}

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
  `2. llmlb whatif: 20,000-request one-hour trace, ${policies.length} policies, 8 replicas, ${availableParallelism()} cores`,
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
