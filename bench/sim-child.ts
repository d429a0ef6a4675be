/**
 * bench:sim's child: times `simulate` for one policy in a fresh process, so no other policy's code
 * shares its JIT feedback (one policy per process, as `llmlb whatif`'s workers run them).
 *
 *   node sim-child.js SRC_ROOT SCENARIO POLICY WARMUP REPEAT
 *
 * SRC_ROOT is a compiled tree's src/ (this revision's, or BENCH_BASE's); POLICY a built-in name,
 * a push mode as `name+sp-p`. Prints one JSON line: per timed run its requests, wall and CPU
 * milliseconds (CPU: the whole process, GC threads included).
 */
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import type { PolicySpec } from '../src/core/policies/index.js';
import type * as ScenarioLoad from '../src/scenario/load.js';
import type * as Simulator from '../src/sim/simulator.js';

const [srcRoot, scenarioPath, policyArg, warmupArg, repeatArg] = process.argv.slice(2);
if (!srcRoot || !scenarioPath || !policyArg)
  throw new Error('usage: sim-child SRC_ROOT SCENARIO POLICY [WARMUP] [REPEAT]');
const from = (p: string): string => pathToFileURL(`${srcRoot}/${p}`).href;
const { loadScenario } = (await import(from('scenario/load.js'))) as typeof ScenarioLoad;
const { simulate } = (await import(from('sim/simulator.js'))) as typeof Simulator;

const scenario = loadScenario(scenarioPath);
const [name, push] = policyArg.split('+') as [string, string | undefined];
const listed = scenario.policies.find((p) => p.name === name);
const spec: PolicySpec =
  push !== undefined ? { name, params: { ...(listed?.params ?? {}), push } } : (listed ?? { name });
const cpu = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
// Every run its own seed: a run pays for building its workload, as one `llmlb simulate` or whatif
// worker does (a scenario may keep the last seed's requests for the next policy of that seed).
let seed = 1;
for (let i = 0; i < Number(warmupArg ?? 3); i++) simulate(scenario, spec, { seed: seed++ });
const requests: number[] = [];
const wallMs: number[] = [];
const cpuMs: number[] = [];
for (let i = 0; i < Number(repeatArg ?? 15); i++) {
  const c0 = cpu();
  const t0 = performance.now();
  requests.push(simulate(scenario, spec, { seed: seed++ }).records.length);
  wallMs.push(performance.now() - t0);
  cpuMs.push(cpu() - c0);
}
process.stdout.write(JSON.stringify({ requests, wallMs, cpuMs }) + '\n');
