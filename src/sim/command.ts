import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { UsageError } from '../commands/usage-error.js';
import { createPolicy, type PolicySpec } from '../core/policies/index.js';
import { writeCharts } from '../report/charts.js';
import { policyResult, resultsJson, type Results } from '../report/results.js';
import { backendTable, comparisonTable } from '../report/table.js';
import { loadScenario } from '../scenario/load.js';
import type { Scenario } from '../scenario/types.js';
import { exhaustiveOracle } from './oracle.js';
import { simulate, type RunResult } from './simulator.js';

/** The policies to run: `--policies a,b` (bare names) or the scenario's list. Unknown names → UsageError. */
export function choosePolicies(scenario: Scenario, names: readonly string[] | undefined): PolicySpec[] {
  const specs = names && names.length > 0 ? names.map((name) => ({ name })) : [...scenario.policies];
  for (const s of specs) {
    try {
      createPolicy(s, () => 0.5);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  return specs;
}

export function loadScenarioOrUsage(path: string): Scenario {
  try {
    return loadScenario(path);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

export function simResults(scenario: Scenario, seed: number, runs: readonly RunResult[]): Results {
  return {
    scenario: scenario.name,
    seed,
    mode: 'simulate',
    policies: runs.map((r) => {
      const prefix = r.backends.reduce((a, b) => ({ queries: a.queries + b.prefixQueries, hits: a.hits + b.prefixHits }), {
        queries: 0,
        hits: 0,
      });
      return policyResult(
        r.policy,
        r.records,
        scenario.fleet.map((b) => b.name),
        prefix,
      );
    }),
  };
}

/** `llmlb simulate`: every policy on the scenario in virtual time; table, results.json, charts. */
export async function runSimulateCommand(opts: {
  scenarioPath: string;
  policies?: string[] | undefined;
  seed?: number | undefined;
  outDir?: string | undefined;
  charts?: boolean;
}): Promise<Results> {
  const scenario = loadScenarioOrUsage(opts.scenarioPath);
  const specs = choosePolicies(scenario, opts.policies);
  const seed = opts.seed ?? scenario.seed;
  const out = opts.outDir ?? 'out/simulate';
  const runs: RunResult[] = [];
  let simulated = 0;
  let wall = 0;
  for (const spec of specs) {
    const t0 = performance.now();
    const run = simulate(scenario, spec, { seed });
    wall += (performance.now() - t0) / 1000;
    simulated += run.simulatedS;
    runs.push(run);
  }
  const results = simResults(scenario, seed, runs);
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'results.json'), resultsJson(results));
  const lines = [
    `scenario ${scenario.name} (seed ${seed}), simulated: ${scenario.fleet.length} backends`,
    '',
    comparisonTable(results),
    '',
    backendTable(results),
    '',
  ];
  if (runs[0] && runs[0].records.length <= 12 && scenario.fleet.length ** runs[0].records.length <= 1 << 16) {
    const o = exhaustiveOracle(scenario, { seed });
    lines.push(
      `oracle (${o.evaluated} assignments): best mean latency ${o.best.meanLatencyS.toFixed(3)} s, worst ${o.worst.meanLatencyS.toFixed(3)} s`,
      '',
    );
  }
  lines.push(`speed: ${simulated.toFixed(0)} simulated s in ${wall.toFixed(2)} wall s = ${(simulated / Math.max(wall, 1e-9)).toFixed(0)}× real time`);
  if (opts.charts !== false) {
    const files = await writeCharts(
      out,
      scenario.name,
      runs.map((r) => ({ policy: r.policy, records: r.records, samples: r.samples })),
    );
    lines.push(`wrote ${join(out, 'results.json')} and ${files.length} charts in ${out}/`);
  }
  process.stdout.write(lines.join('\n') + '\n');
  return results;
}
