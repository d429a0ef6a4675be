/**
 * `llmlb whatif --trace FILE --config llmlb.yaml [--replicas 4,8,16] [--policies …] [--slo ttft-p90=2s]`:
 * replays a trace (captured by `serve` or a public one) on the config's fleet under every policy and
 * replica count, in parallel worker threads, and says which policy and how few replicas meet the SLO.
 * Writes DIR/results.json (the simulate shape: one entry per policy × replicas, named
 * `policy@replicas`) and SVG charts.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { ConfigError, loadConfigFile } from '../config/load.js';
import type { RouterConfig } from '../config/schema.js';
import { createPolicy, policyNames, type PolicySpec } from '../core/policies/index.js';
import { readRlWeights } from '../rl/weights-file.js';
import { defaultProfile } from '../engine/profile.js';
import type { EngineProfile } from '../engine/types.js';
import { resultsJson, type PolicyResult, type Results } from '../report/results.js';
import { preloadCharts } from '../report/charts.js';
import { recommendationLine, whatifTable } from '../report/whatif-table.js';
import { writeWhatifCharts } from '../report/whatif-charts.js';
import {
  meetsSlo,
  parseSlo as parseSloTerms,
  recommend,
  SloError,
  type Recommendation,
  type SloTerm,
} from '../report/slo.js';
import { loadProfileFile } from '../scenario/profile-file.js';
import { defaultThreads, startTracePool } from '../sim/pool.js';
import type { TraceJob, TraceJobResult } from '../sim/trace-job.js';
import {
  TraceError,
  traceWorkload,
  type TraceFormatName,
  type TraceParams,
  type TraceReplay,
} from '../workloads/trace.js';
import type { SweepBar, SweepRun, SweepSection } from '../report/capacity.js';
import { checkRateScales, runSweep, sweepReport } from './load-sweep.js';
import { policyCheck } from './policy-check.js';
import { UsageError } from './usage-error.js';

/**
 * Policies compared when --policies is not given (after the config's own). Every policy registered
 * in src/core/policies/index.ts is either here or in WHATIF_LEFT_OUT (whatif-policies.test.ts
 * checks it); any registered name runs when named with --policies (`pinned` as the config's own
 * policy, which names its backend).
 */
export const WHATIF_POLICIES = [
  'round-robin',
  'least-connections',
  'random',
  'jsq',
  'estimated-wait',
  'ollama-router',
  'prefix-trie',
  'consistent-hash',
  'sglang-cache-aware',
  'max-capacity',
  'min-min',
  'workload-aware',
];

/** Built-ins not in the default comparison, and why: each runs when named with --policies. */
export const WHATIF_LEFT_OUT: ReadonlyMap<string, string> = new Map([
  ['pinned', "needs its backend: runs as the config's own policy (with its params)"],
  ['weighted-round-robin', 'round robin unless the config gives its backends weights'],
  ['rl', 'needs weights trained for the fleet (llmlb train)'],
]);

/** Parse `--slo` (terms joined by commas, all must hold). Throws UsageError. */
export function parseSlo(text: string): SloTerm[] {
  try {
    return parseSloTerms(text);
  } catch (e) {
    if (e instanceof SloError) throw new UsageError(e.message);
    throw e;
  }
}

export interface WhatifOptions {
  tracePath: string;
  format?: TraceFormatName | undefined;
  configPath: string;
  replicas?: number[] | undefined;
  policies?: string[] | undefined;
  outDir?: string | undefined;
  slo?: string | undefined;
  /** Engine profile file (`llmlb profile` output); default: the built-in profile. */
  profilePath?: string | undefined;
  seed?: number | undefined;
  /** Replay speed (the trace's rateScale); a sweep's multiples multiply it. */
  rateScale?: number | undefined;
  /**
   * `--rate-scale`: one value → the replay that much faster (times rateScale); two or more → a
   * load sweep: every policy and replica count at every multiple, with capacity curves.
   */
  rateScales?: readonly number[] | undefined;
  limit?: number | undefined;
  skipBad?: boolean | undefined;
  threads?: number | undefined;
  charts?: boolean | undefined;
  quiet?: boolean | undefined;
}

export interface WhatifResults extends Results {
  readonly policies: readonly (PolicyResult & { readonly policy: string; readonly replicas: number })[];
  readonly trace: {
    readonly path: string;
    readonly format: string;
    readonly requests: number;
    readonly skippedLines: number;
    readonly promptTokens: number;
    readonly outputTokens: number;
  };
  /** With a sweep: the recommendation at the highest load swept. */
  readonly recommendation: Recommendation | null;
  /**
   * A load sweep: then `policies` holds every run (`policy@replicas@xK`, with its `rateScale`) and
   * this the capacity summary (series `policy`, or `policy@replicas` with several replica counts)
   * and the recommendation at each load.
   */
  readonly sweep?: SweepSection & {
    readonly recommendations: readonly {
      readonly rateScale: number;
      readonly recommendation: Recommendation | null;
    }[];
  };
}

/** The replayed trace as results.json names it. */
function traceSummary(
  path: string,
  format: string,
  stats: { requests: number; skipped: number; promptTokens: number; outputTokens: number },
): WhatifResults['trace'] {
  return {
    path,
    format,
    requests: stats.requests,
    skippedLines: stats.skipped,
    promptTokens: stats.promptTokens,
    outputTokens: stats.outputTokens,
  };
}

/** Seconds to the millisecond. */
const sec = (x: number): string => x.toFixed(3);

/** The flags read: the config, the engine profile, replica counts and policies (each checked). */
function whatifInputs(opts: WhatifOptions): {
  config: RouterConfig;
  profile: EngineProfile;
  replicas: number[];
  specs: PolicySpec[];
} {
  let config;
  try {
    config = loadConfigFile(opts.configPath, policyCheck);
  } catch (e) {
    if (e instanceof ConfigError) throw new UsageError(e.message);
    throw e;
  }
  let profile: EngineProfile = defaultProfile();
  if (opts.profilePath !== undefined) {
    try {
      profile = loadProfileFile(opts.profilePath);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
  }
  const replicas = [...new Set(opts.replicas ?? [config.backends.length])].sort((a, b) => a - b);
  if (replicas.some((r) => !Number.isInteger(r) || r < 1))
    throw new UsageError('--replicas must list positive integers, e.g. 4,8,16');

  // The config's own policy first, then the others (each once).
  const own: PolicySpec = { name: config.policy.name, params: config.policy.params };
  const names = opts.policies ?? [own.name, ...WHATIF_POLICIES.filter((n) => n !== own.name)];
  const specs: PolicySpec[] = names.map((n) => (n === own.name ? own : { name: n }));
  for (const s of specs) {
    try {
      createPolicy(s, () => 0.5, config.scheduling, { rlWeights: readRlWeights });
    } catch (e) {
      throw new UsageError(
        `--policies: ${(e as Error).message} (known: ${policyNames(config.scheduling).join(', ')})`,
      );
    }
  }
  return { config, profile, replicas, specs };
}

export async function runWhatifCommand(opts: WhatifOptions): Promise<WhatifResults> {
  const t0 = performance.now();
  const seed = opts.seed ?? 1;
  const slo = opts.slo !== undefined ? parseSlo(opts.slo) : [];
  const { config, profile, replicas, specs } = whatifInputs(opts);
  const base = config.backends;

  const asked = opts.rateScales !== undefined ? checkRateScales(opts.rateScales) : [1];
  const sweep = asked.length > 1;
  // One multiple: the replay that much faster, run as the plain ×1 of that speed; a sweep checks
  // the trace at the base speed and runs each multiple of it.
  const baseScale = (opts.rateScale ?? 1) * (sweep ? 1 : asked[0]!);
  const multiples = sweep ? asked : [1];

  /** The check pass over the trace, then one job per replica count × policy (× load multiple). */
  const traceJobs = (): { replay: TraceReplay; jobsAt: (k: number) => TraceJob[] } => {
    // One pass to validate the trace and learn its span and models (streamed: memory stays flat).
    const firstModel = base.find((b) => b.models && b.models.length > 0)?.models?.[0];
    const trace: TraceParams = {
      path: opts.tracePath,
      ...(opts.format !== undefined ? { format: opts.format } : {}),
      ...(opts.rateScale !== undefined || baseScale !== 1 ? { rateScale: baseScale } : {}),
      ...(opts.limit !== undefined ? { limit: opts.limit } : {}),
      ...(opts.skipBad ? { skipBad: true } : {}),
      ...(firstModel !== undefined ? { model: firstModel } : {}),
    };
    let replay: TraceReplay;
    try {
      replay = traceWorkload(trace, seed);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT')
        throw new UsageError(`trace file not found: ${opts.tracePath}`);
      if (e instanceof TraceError) throw new UsageError(e.message);
      throw e;
    }
    const stats = replay.stats;
    if (stats.requests === 0) throw new UsageError(`${opts.tracePath}: no requests to replay`);

    /** At ×k of the checked replay: k× faster, so its last send comes at lastAtS / k. */
    const jobsAt = (k: number): TraceJob[] => {
      const jobs: TraceJob[] = [];
      const atK = k === 1 ? trace : { ...trace, rateScale: baseScale * k };
      for (const r of replicas) {
        // The config's backends repeated: `gpu-a-0, gpu-b-0, gpu-a-1, …` (its own names at its own size).
        const fleet = Array.from({ length: r }, (_, i) => {
          const b = base[i % base.length]!;
          return {
            name: r === base.length ? b.name : `${b.name}-${Math.floor(i / base.length)}`,
            profile,
            models: b.models ? [...b.models] : stats.models,
            maxConcurrency: b.maxConcurrency,
            weight: b.weight,
          };
        });
        for (const policy of specs)
          jobs.push({
            trace: { ...atK, skipBad: true },
            fleet,
            policy,
            scheduling: config.scheduling,
            seed,
            durationS: stats.lastAtS / k + 1,
            graceS: 3600,
            inOrder: stats.inOrder,
          });
      }
      return jobs;
    };
    return { replay, jobsAt };
  };
  const threads = opts.threads ?? defaultThreads();
  // The workers start now and load the simulator while this thread reads the trace.
  const pool = startTracePool(Math.min(threads, specs.length * replicas.length * multiples.length));
  let replay: TraceReplay;
  let steps: { rateScale: number; results: TraceJobResult[] }[];
  let simWallS: number;
  try {
    let jobsAt: (k: number) => TraceJob[];
    ({ replay, jobsAt } = traceJobs());
    const tSim = performance.now();
    steps = await runSweep(multiples, jobsAt, (jobs) => {
      // The chart code (vega, ~0.5 s of CPU to load) loads once every job has been handed out: from
      // then on a core idles whenever a worker finishes, and the main thread would only wait.
      const preload = opts.charts !== false ? Math.max(0, jobs.length - Math.min(threads, jobs.length)) : -1;
      if (preload === 0) preloadCharts();
      let finished = 0;
      return pool.run(jobs, () => {
        if (++finished === preload) preloadCharts();
      });
    });
    simWallS = (performance.now() - tSim) / 1000;
  } finally {
    await pool.close();
  }
  const out = opts.outDir ?? 'out/whatif';
  const done: Simulated = {
    opts,
    out,
    steps,
    replay,
    slo,
    replicas,
    specs,
    threads,
    simWallS,
    t0,
    base: base.map((b) => b.name),
  };
  return sweep ? whatifSweep(done) : whatifOne(done);
}

/** The simulated runs and what reporting them needs. */
interface Simulated {
  readonly opts: WhatifOptions;
  readonly out: string;
  readonly steps: readonly { readonly rateScale: number; readonly results: readonly TraceJobResult[] }[];
  readonly replay: TraceReplay;
  readonly slo: readonly SloTerm[];
  readonly replicas: readonly number[];
  readonly specs: readonly PolicySpec[];
  readonly threads: number;
  readonly simWallS: number;
  readonly t0: number;
  readonly base: readonly string[];
}

/** whatif at one load: the table, the recommendation, results.json and the charts. */
async function whatifOne(a: Simulated): Promise<WhatifResults> {
  const { opts, out, replay, slo, replicas, specs, threads, simWallS, t0 } = a;
  const stats = replay.stats;
  const runs = a.steps[0]!.results;

  const results: WhatifResults = {
    scenario: `whatif ${basename(opts.tracePath)}`,
    seed: opts.seed ?? 1,
    mode: 'simulate',
    policies: runs.map((r) => ({
      ...r.result,
      name: `${r.policy}@${r.replicas}`,
      policy: r.policy,
      replicas: r.replicas,
    })),
    trace: traceSummary(opts.tracePath, replay.format.name, stats),
    recommendation: recommend(runs, replicas, slo),
  };

  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'results.json'), resultsJson(results));
  const lines = [
    ...traceLines(opts, replay, a.base),
    '',
    whatifTable(runs, slo),
    '',
    recommendationLine(results.recommendation, slo, replicas),
  ];
  if (opts.charts !== false) {
    const files = await writeWhatifCharts(
      out,
      basename(opts.tracePath),
      runs.map((r) => ({
        policy: r.policy,
        replicas: r.replicas,
        latencyCdf: r.latencyCdf,
        ttftCdf: r.ttftCdf,
        ttftP90: r.result.ttftS.p90,
      })),
      slo.length > 0
        ? {
            label: slo.map((t) => t.text).join(', '),
            ttftP90S: slo.find((t) => t.metric === 'ttftS' && t.stat === 'p90')?.limitS,
          }
        : undefined,
    );
    lines.push(`wrote ${join(out, 'results.json')} and ${files.length} SVG charts in ${out}/`);
  } else lines.push(`wrote ${join(out, 'results.json')}`);
  const simulated = runs.reduce((a, r) => a + r.requests, 0);
  lines.push(
    `${runs.length} runs (${specs.length} policies × ${replicas.length} replica counts) on ${Math.min(threads, runs.length)} threads: ` +
      `${simulated} requests simulated in ${simWallS.toFixed(2)} s; whole command ${((performance.now() - t0) / 1000).toFixed(2)} s`,
  );
  if (!opts.quiet) process.stdout.write(lines.join('\n') + '\n');
  return results;
}

/** What the trace held and the fleet it is replayed on. */
function traceLines(opts: WhatifOptions, replay: TraceReplay, fleet: readonly string[]): string[] {
  const stats = replay.stats;
  return [
    `trace ${opts.tracePath} (${replay.format.name}): ${stats.requests} requests over ${sec(stats.lastAtS)} s, ` +
      `${stats.promptTokens} prompt + ${stats.outputTokens} output tokens` +
      (stats.skipped > 0 ? `; skipped ${stats.skipped} bad lines (first: ${stats.firstBad})` : ''),
    `fleet: ${fleet.join(', ')} from ${opts.configPath}, profile ${opts.profilePath ?? '(built-in)'}`,
  ];
}

/**
 * whatif's load sweep: a table and recommendation per multiple, then the capacity table (against
 * --slo when given, else the default bar), where each policy breaks, and the capacity-curve chart.
 */
async function whatifSweep(a: Simulated): Promise<WhatifResults> {
  const { opts, out, steps, replay, slo, replicas } = a;
  const stats = replay.stats;
  const series = (r: TraceJobResult): string =>
    replicas.length > 1 ? `${r.policy}@${r.replicas}` : r.policy;
  const lines = [...traceLines(opts, replay, a.base), ''];
  const recommendations = steps.map((step) => ({
    rateScale: step.rateScale,
    recommendation: recommend(step.results, replicas, slo),
  }));
  const sweepRuns: SweepRun[] = [];
  steps.forEach((step, i) => {
    lines.push(
      `load ×${step.rateScale} (the trace ${step.rateScale}× as fast):`,
      whatifTable(step.results, slo),
      recommendationLine(recommendations[i]!.recommendation, slo, replicas),
      '',
    );
    for (const r of step.results)
      sweepRuns.push({ series: series(r), rateScale: step.rateScale, result: r.result });
  });
  const bar: SweepBar | undefined =
    slo.length > 0
      ? { text: `--slo ${slo.map((t) => t.text).join(',')}`, holds: (r) => meetsSlo(r, slo) }
      : undefined;
  mkdirSync(out, { recursive: true });
  const report = await sweepReport({
    runs: sweepRuns,
    bar,
    out,
    title: basename(opts.tracePath),
    charts: opts.charts !== false,
  });
  const results: WhatifResults = {
    scenario: `whatif ${basename(opts.tracePath)}`,
    seed: opts.seed ?? 1,
    mode: 'simulate',
    policies: steps.flatMap((step) =>
      step.results.map((r) => ({
        ...r.result,
        name: `${r.policy}@${r.replicas}@x${step.rateScale}`,
        policy: r.policy,
        replicas: r.replicas,
        rateScale: step.rateScale,
      })),
    ),
    trace: traceSummary(opts.tracePath, replay.format.name, stats),
    recommendation: recommendations.at(-1)!.recommendation,
    sweep: { ...report.sweep, recommendations },
  };
  writeFileSync(join(out, 'results.json'), resultsJson(results));
  lines.push(...report.lines, '');
  const runs = steps.reduce((n, s) => n + s.results.length, 0);
  const simulated = steps.reduce((n, s) => n + s.results.reduce((m, r) => m + r.requests, 0), 0);
  lines.push(
    report.chart
      ? `wrote ${join(out, 'results.json')} and ${join(out, report.chart)}`
      : `wrote ${join(out, 'results.json')}`,
    `${runs} runs (${a.specs.length} policies × ${replicas.length} replica counts × ${steps.length} loads) on ` +
      `${Math.min(a.threads, runs)} threads: ${simulated} requests simulated in ${a.simWallS.toFixed(2)} s; ` +
      `whole command ${((performance.now() - a.t0) / 1000).toFixed(2)} s`,
  );
  if (!opts.quiet) process.stdout.write(lines.join('\n') + '\n');
  return results;
}
