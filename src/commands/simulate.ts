import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { checkRateScales, runSweep, sweepReport } from './load-sweep.js';
import { UsageError } from './usage-error.js';
import { createPolicy, type PolicySpec } from '../core/policies/index.js';
import { readRlWeights } from '../rl/weights-file.js';
import { writeCharts } from '../report/charts.js';
import type { SweepRun, SweepSection } from '../report/capacity.js';
import {
  oracleSummary,
  policyResult,
  resultsJson,
  type PolicyResult,
  type Results,
} from '../report/results.js';
import { fleetClassTable } from '../sim/class-table.js';
import { backendTable, comparisonTable, localityTable, oracleTable } from '../report/table.js';
import { loadScenario } from '../scenario/load.js';
import type { Scenario } from '../scenario/types.js';
import { assignmentCount, exhaustiveOracle } from '../sim/oracle.js';
import type { FederationRunResult } from '../sim/federation.js';
import { federationMode } from '../sim/federation-modes.js';
import { startScenarioPool } from '../sim/pool.js';
import { runScenarioJob, type ScenarioJob } from '../sim/scenario-job.js';
import { policyLabel, type RunResult } from '../sim/simulator.js';
import { TraceReplay } from '../workloads/trace.js';

// The CLI maps this class to exit code 2; re-exported so callers of the simulate command need one import.
export { UsageError };

/** Scenarios with at most this many requests get the oracle line automatically. */
export const AUTO_ORACLE_REQUESTS = 12;

/**
 * The policies to run: `--policies a,b` or the scenario's list. A name the scenario also lists keeps
 * the scenario's parameters for it; a report label (`prefix-trie+sp-p`) picks that entry exactly.
 * Unknown names or bad parameters → UsageError (listing known ones).
 */
/** `name+mode` not listed by the scenario → that policy with `push: mode`. */
function labelSpec(label: string): PolicySpec {
  const plus = label.indexOf('+');
  return plus > 0 ? { name: label.slice(0, plus), params: { push: label.slice(plus + 1) } } : { name: label };
}

export function choosePolicies(scenario: Scenario, names: readonly string[] | undefined): PolicySpec[] {
  const specs =
    names && names.length > 0
      ? names.map(
          (name) =>
            scenario.policies.find((p) => policyLabel(p) === name) ??
            scenario.policies.find((p) => p.name === name) ??
            labelSpec(name),
        )
      : [...scenario.policies];
  if (specs.length === 0)
    throw new UsageError(`scenario '${scenario.name}' lists no policies; pass --policies`);
  for (const s of specs) {
    try {
      // Multi-router scenarios compare how routers work together, each naming its picker.
      const kind = scenario.regions ? 'regions' : scenario.routers ? 'routers' : undefined;
      const deps = { rlWeights: readRlWeights };
      if (kind) createPolicy(federationMode(s, kind).local, () => 0.5, scenario.scheduling, deps);
      else createPolicy(s, () => 0.5, scenario.scheduling, deps);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  return specs;
}

/** The scenario file, at `rateScale`× its load when given (a sweep's multiple). */
export function loadScenarioOrUsage(path: string, rateScale?: number): Scenario {
  try {
    return loadScenario(path, { rateScale });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** results.json for simulated runs (design §2). */
export function simResults(scenario: Scenario, seed: number, runs: readonly RunResult[]): Results {
  return {
    scenario: scenario.name,
    seed,
    mode: 'simulate',
    policies: runs.map((r) => {
      let queries = 0;
      let hits = 0;
      for (const b of r.backends) {
        queries += b.prefixQueries;
        hits += b.prefixHits;
      }
      return policyResult(
        r.policy,
        r.records,
        scenario.fleet.map((b) => b.name),
        { queries, hits },
        r.samples,
      );
    }),
  };
}

/** results.json of a scenario whose workload replays a trace: what the replay read. */
export interface SimulateResults extends Results {
  readonly trace?: {
    readonly format: string;
    readonly requests: number;
    /** Malformed lines skipped (`skipBad: true`; 0 otherwise: a bad line fails the load). */
    readonly skippedLines: number;
  };
  /** The multiple of the scenario's load this run was at (absent: ×1). */
  readonly rateScale?: number;
  /**
   * A load sweep (`--rate-scale 1,2`, or the scenario's `rateScales`): then `policies` holds every
   * run, named `policy@xK` with its `rateScale`, and this the capacity summary.
   */
  readonly sweep?: SweepSection;
}

/**
 * A trace workload's counts of its file (the skipped lines are a property of the file, not of the
 * seed); undefined for other workloads. A trace driver has made its full pass when created
 * (traceWorkload checks the file), so its stats are read, not counted again.
 */
function traceStats(scenario: Scenario, seed: number): TraceReplay | undefined {
  const driver = scenario.createDriver(seed);
  return driver instanceof TraceReplay ? driver : undefined;
}

export interface SimulateCommandOptions {
  scenarioPath: string;
  /** Overrides the scenario's list. */
  policies?: string[] | undefined;
  /** Default: the scenario's seed. */
  seed?: number | undefined;
  /** Default: out/simulate. */
  outDir?: string | undefined;
  /** true: run the oracle (UsageError when too big); false: never; default: when ≤ 12 requests. */
  oracle?: boolean | undefined;
  /** false: skip the SVG charts (tests, fidelity bench). */
  charts?: boolean;
  /** true: print nothing (callers that only want the returned results). */
  quiet?: boolean;
  /**
   * Worker threads for the policies' runs (default 1: all in this thread; at most one per policy).
   * Each run is the same on any thread: results are identical. A worker pays its start-up and its
   * own JIT warm-up (~0.7 s on the 2-core dev machine, where two memory-bound runs side by side
   * also slow each other down), so more threads pay off only for long runs on many cores.
   */
  threads?: number | undefined;
  /**
   * Load multiples (`--rate-scale`; default: the scenario's `rateScales`, else none): one → a plain
   * run at that multiple of the workload's load; two or more → a sweep, every policy at every
   * multiple, with the capacity table and chart.
   */
  rateScales?: readonly number[] | undefined;
}

/** Runs the jobs in this thread (on `scenarioAt`'s scenarios, already loaded) or on a worker pool. */
async function runJobs(
  jobs: readonly ScenarioJob[],
  threads: number,
  scenarioAt: (job: ScenarioJob) => Scenario,
): Promise<RunResult[]> {
  // This thread's scenarios, already loaded: its runs share what each keeps between runs of a seed.
  if (threads <= 1) return jobs.map((job) => runScenarioJob(job, scenarioAt(job)).run);
  // Each worker loads the file again (a workload is code): the same scenario, the same runs.
  const pool = startScenarioPool(threads);
  try {
    return (await pool.run(jobs)).map((r) => r.run);
  } finally {
    await pool.close();
  }
}

/** The speed line: simulated seconds per wall second. */
function speedLine(runs: readonly RunResult[], wallS: number, threadsNote: string): string {
  let simulated = 0;
  for (const r of runs) simulated += r.simulatedS;
  return (
    `speed: ${simulated.toFixed(0)} simulated s in ${wallS.toFixed(2)} wall s = ` +
    `${(simulated / Math.max(wallS, 1e-9)).toFixed(0)}× real time` +
    threadsNote
  );
}

/**
 * `llmlb simulate`: every policy on the scenario in virtual time; prints the comparison table (and
 * the oracle's bounds for small scenarios) and the speed-up, writes DIR/results.json and SVG charts.
 */
export async function runSimulateCommand(opts: SimulateCommandOptions): Promise<SimulateResults> {
  if (opts.seed !== undefined && !(Number.isSafeInteger(opts.seed) && opts.seed >= 0)) {
    throw new UsageError(`--seed must be a non-negative integer, got ${opts.seed}`);
  }
  let scenario = loadScenarioOrUsage(opts.scenarioPath);
  const specs = choosePolicies(scenario, opts.policies);
  const seed = opts.seed ?? scenario.seed;
  const out = opts.outDir ?? 'out/simulate';
  if (opts.threads !== undefined && !(Number.isSafeInteger(opts.threads) && opts.threads >= 1)) {
    throw new UsageError(`--threads must be a positive integer, got ${opts.threads}`);
  }
  const asked = opts.rateScales ?? scenario.rateScales;
  const multiples =
    asked === undefined
      ? [1]
      : checkRateScales(asked, opts.rateScales ? '--rate-scale' : `${opts.scenarioPath}: rateScales`);
  if (multiples.length > 1) return runSimulateSweep(opts, scenario, specs, seed, multiples);
  // One multiple: a plain run, at that multiple of the load (×1: the file as written).
  const rateScale = multiples[0] === 1 ? undefined : multiples[0];
  if (rateScale !== undefined) scenario = loadScenarioOrUsage(opts.scenarioPath, rateScale);
  const threads = Math.min(opts.threads ?? 1, specs.length);
  const jobs: ScenarioJob[] = specs.map((policy) => ({
    scenarioPath: opts.scenarioPath,
    policy,
    seed,
    ...(rateScale !== undefined ? { rateScale } : {}),
  }));
  const t0 = performance.now();
  const runs = await runJobs(jobs, threads, () => scenario);
  const wall = (performance.now() - t0) / 1000;
  let results: SimulateResults = simResults(scenario, seed, runs);
  if (rateScale !== undefined) results = { ...results, rateScale };
  const replay = traceStats(scenario, seed);
  if (replay)
    results = {
      ...results,
      trace: {
        format: replay.format.name,
        requests: replay.stats.requests,
        skippedLines: replay.stats.skipped,
      },
    };

  const requests = runs[0]?.records.length ?? 0;
  const small =
    !scenario.regions &&
    !scenario.routers &&
    requests <= AUTO_ORACLE_REQUESTS &&
    Number.isFinite(assignmentCount(scenario.fleet.length, requests));
  if (opts.oracle === true || (opts.oracle === undefined && small)) {
    try {
      results = { ...results, oracle: oracleSummary(exhaustiveOracle(scenario, { seed })) };
    } catch (err) {
      // Asked for explicitly: a scenario it cannot handle is the caller's mistake. Automatic: say why not.
      if (opts.oracle === true) throw new UsageError((err as Error).message);
      process.stderr.write(`llmlb: ${(err as Error).message}\n`);
    }
  }

  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'results.json'), resultsJson(results));
  const lines = [
    `scenario ${scenario.name} (seed ${seed}), simulated: ${scenario.fleet.length} backends, ${requests} requests` +
      (rateScale !== undefined ? ` (load ×${rateScale})` : ''),
    ...(replay
      ? [
          `trace (${replay.format.name}): ${replay.stats.requests} requests, skipped ${replay.stats.skipped} bad lines` +
            (replay.stats.firstBad !== undefined ? ` (first: ${replay.stats.firstBad})` : ''),
        ]
      : []),
    '',
    comparisonTable(results),
    '',
    localityTable(results),
    '',
    backendTable(results),
    '',
  ];
  // The performance-aware router's per-class view (task-mix workloads), each request classed by its backend's speed.
  const classes = fleetClassTable(runs, scenario.fleet);
  if (classes) lines.push(classes, '');
  if (results.oracle) lines.push(oracleTable(results), '');
  for (const r of runs) {
    const routers = (r as Partial<FederationRunResult>).routers;
    if (!routers) continue;
    const parts = routers.map(
      (x) => `${x.name} ${x.arrived} in, ${x.forwardedOut} forwarded, ${x.servedForPeers} for peers`,
    );
    lines.push(`routers ${r.policy}: ${parts.join('; ')}`);
  }
  if (runs.some((r) => 'routers' in r)) lines.push('');
  lines.push(speedLine(runs, wall, threads > 1 ? ` (${specs.length} policies on ${threads} threads)` : ''));
  if (opts.charts !== false) {
    const files = await writeCharts(
      out,
      scenario.name,
      runs.map((r) => ({
        policy: r.policy,
        records: r.records,
        samples: r.samples,
        routerSamples: r.routerSamples,
      })),
    );
    lines.push(`wrote ${join(out, 'results.json')} and ${files.length} SVG charts in ${out}/`);
  } else {
    lines.push(`wrote ${join(out, 'results.json')}`);
  }
  if (!opts.quiet) process.stdout.write(lines.join('\n') + '\n');
  return results;
}

/**
 * A load sweep: every policy at every multiple (one batch of jobs, spread over `--threads`), a
 * comparison table per multiple, then the capacity table, where each policy breaks, and the
 * capacity-curve chart. results.json: every run (`policy@xK`, with its `rateScale`) and `sweep`.
 */
async function runSimulateSweep(
  opts: SimulateCommandOptions,
  base: Scenario,
  specs: readonly PolicySpec[],
  seed: number,
  multiples: readonly number[],
): Promise<SimulateResults> {
  const out = opts.outDir ?? 'out/simulate';
  // Every multiple read here first: a workload that cannot be scaled fails before any run.
  const scenarios = new Map<number, Scenario>(
    multiples.map((k) => [k, k === 1 ? base : loadScenarioOrUsage(opts.scenarioPath, k)]),
  );
  const jobsAt = (k: number): ScenarioJob[] =>
    specs.map((policy) => ({
      scenarioPath: opts.scenarioPath,
      policy,
      seed,
      ...(k !== 1 ? { rateScale: k } : {}),
    }));
  const total = specs.length * multiples.length;
  const threads = Math.min(opts.threads ?? 1, total);
  const t0 = performance.now();
  const steps = await runSweep(multiples, jobsAt, (jobs) =>
    runJobs(jobs, threads, (job) => scenarios.get(job.rateScale ?? 1)!),
  );
  const wall = (performance.now() - t0) / 1000;

  const lines: string[] = [
    `scenario ${base.name} (seed ${seed}), simulated: ${base.fleet.length} backends, ` +
      `load sweep ×${multiples.join(', ×')} (what ×k means: llmlb simulate --help)`,
  ];
  // A trace's counts of its file (at ×1: its own speed), as a plain run prints them.
  const replay = traceStats(base, seed);
  if (replay)
    lines.push(
      `trace (${replay.format.name}): ${replay.stats.requests} requests at ×1, skipped ${replay.stats.skipped} bad lines` +
        (replay.stats.firstBad !== undefined ? ` (first: ${replay.stats.firstBad})` : ''),
    );
  lines.push('');
  const all: (PolicyResult & { readonly rateScale: number })[] = [];
  const sweepRuns: SweepRun[] = [];
  for (const step of steps) {
    const at = simResults(scenarios.get(step.rateScale)!, seed, step.results);
    lines.push(
      `load ×${step.rateScale}: ${step.results[0]?.records.length ?? 0} requests`,
      comparisonTable(at),
      '',
    );
    for (const p of at.policies) {
      all.push({ ...p, name: `${p.name}@x${step.rateScale}`, rateScale: step.rateScale });
      sweepRuns.push({ series: p.name, rateScale: step.rateScale, result: p });
    }
  }
  mkdirSync(out, { recursive: true });
  const report = await sweepReport({ runs: sweepRuns, out, title: base.name, charts: opts.charts !== false });
  const results: SimulateResults = {
    scenario: base.name,
    seed,
    mode: 'simulate',
    policies: all,
    ...(replay
      ? {
          trace: {
            format: replay.format.name,
            requests: replay.stats.requests,
            skippedLines: replay.stats.skipped,
          },
        }
      : {}),
    sweep: report.sweep,
  };
  writeFileSync(join(out, 'results.json'), resultsJson(results));
  lines.push(...report.lines, '');
  const runs = steps.flatMap((s) => s.results);
  lines.push(
    speedLine(
      runs,
      wall,
      threads > 1 ? ` (${specs.length} policies × ${multiples.length} loads on ${threads} threads)` : '',
    ),
    report.chart
      ? `wrote ${join(out, 'results.json')} and ${join(out, report.chart)}`
      : `wrote ${join(out, 'results.json')}`,
  );
  if (!opts.quiet) process.stdout.write(lines.join('\n') + '\n');
  return results;
}
