import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { progressBar } from '../report/progress.js';
import { writeCharts } from '../report/charts.js';
import { policyResult, resultsJson, type Results } from '../report/results.js';
import { backendTable, comparisonTable, localityTable } from '../report/table.js';
import { choosePolicies, loadScenarioOrUsage, UsageError } from './simulate.js';
import { fleetClassTable } from '../sim/class-table.js';
import type { RunResult } from '../sim/simulator.js';
import { policyLabel } from '../sim/simulator.js';
import { runLive, type LiveRun } from '../live-bench/live.js';
import { formatLoopDelay } from '../live-bench/loop-delay.js';

/**
 * `llmlb bench`: the live twin of `simulate` — emulated engines with the scenario's profiles,
 * time-scaled, one fresh router per policy, the workload over HTTP. Same results.json shape;
 * times are reported in model seconds so they compare with the simulation directly.
 */
export async function runBenchCommand(opts: {
  scenarioPath: string;
  policies?: string[] | undefined;
  seed?: number | undefined;
  timeScale?: number | undefined;
  outDir?: string | undefined;
  charts?: boolean;
  quiet?: boolean;
}): Promise<Results> {
  const scenario = loadScenarioOrUsage(opts.scenarioPath);
  // The live bench drives one router; multi-router scenarios are the simulator's for now.
  if (scenario.regions || scenario.routers)
    throw new UsageError(`scenario '${scenario.name}' has regions or routers: run it with llmlb simulate`);
  const specs = choosePolicies(scenario, opts.policies);
  const seed = opts.seed ?? scenario.seed;
  const timeScale = opts.timeScale ?? scenario.timeScale;
  const out = opts.outDir ?? 'out/bench';
  const runs: LiveRun[] = [];
  for (const spec of specs) {
    const bar =
      opts.quiet || !process.stderr.isTTY
        ? undefined
        : progressBar(policyLabel(spec).padEnd(24), process.stderr);
    const run = await runLive(scenario, spec, {
      seed,
      timeScale,
      onProgress: (done, sent) => bar?.update(done, sent),
    });
    bar?.stop();
    const d = run.loopDelayMs;
    // Requests the HTTP client saw fail before any answer (reset, refused, …): the commonest reason.
    const errors = new Map<string, number>();
    for (const r of run.records) if (r.error) errors.set(r.error, (errors.get(r.error) ?? 0) + 1);
    const top = [...errors].sort((a, b) => b[1] - a[1])[0];
    if (!opts.quiet)
      process.stderr.write(
        `${policyLabel(spec)}: ${run.records.length} requests in ${run.wallS.toFixed(1)} s; ` +
          `event-loop delay ${formatLoopDelay(d)}` +
          (top
            ? `; ${[...errors.values()].reduce((a, b) => a + b, 0)} client errors (${top[1]}× ${top[0]})`
            : '') +
          '\n',
      );
    runs.push({ ...run, policy: policyLabel(spec) });
  }
  const results: Results = {
    scenario: scenario.name,
    seed,
    mode: 'bench',
    policies: runs.map((r) =>
      policyResult(
        r.policy,
        r.records.map((x) => ({
          ...x,
          ok: x.finishS !== undefined ? true : x.status === 0 ? undefined : false,
        })),
        scenario.fleet.map((b) => b.name),
        r.engines.reduce((a, e) => ({ queries: a.queries + e.prefixQueries, hits: a.hits + e.prefixHits }), {
          queries: 0,
          hits: 0,
        }),
        r.samples,
      ),
    ),
  };
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'results.json'), resultsJson(results));
  const lines = [
    `scenario ${scenario.name} (seed ${seed}), live at ${timeScale}× time scale; times in model seconds`,
    '',
    comparisonTable(results),
    '',
    localityTable(results),
    '',
    backendTable(results),
    '',
  ];
  // The performance-aware router's per-class view, as simulate prints it (router wait is not seen by the client: '-').
  const classRuns: RunResult[] = runs.map((r) => ({
    policy: r.policy,
    records: r.records.map((x) => ({
      id: x.id,
      label: x.label,
      arrivalS: x.arrivalS,
      dispatchS: undefined,
      firstTokenS: x.firstTokenS,
      finishS: x.finishS,
      backend: x.backend,
      ok: x.finishS !== undefined ? true : undefined,
      failure: undefined,
      promptTokens: x.promptTokens,
      outputTokens: x.outputTokens,
      cachedTokens: 0,
    })),
    samples: [],
    routerSamples: [],
    backends: [],
    simulatedS: 0,
  }));
  const classes = fleetClassTable(classRuns, scenario.fleet);
  if (classes) lines.push(classes, '');
  if (opts.charts !== false) {
    const files = await writeCharts(
      out,
      `${scenario.name} (live)`,
      runs.map((r) => ({
        policy: r.policy,
        records: r.records.map((x) => ({ ...x, ok: x.finishS !== undefined ? true : undefined })),
        samples: r.samples,
        routerSamples: r.routerSamples,
      })),
    );
    lines.push(`wrote ${join(out, 'results.json')} and ${files.length} charts in ${out}/`);
  }
  if (!opts.quiet) process.stdout.write(lines.join('\n') + '\n');
  return results;
}
