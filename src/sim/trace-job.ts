/**
 * One what-if run as plain data (so it can cross to a worker thread): a trace replayed on a fleet
 * under one policy, summarized where it ran — only the summary and a thinned latency CDF travel
 * back, not 20k records.
 */
import type { EndpointPickerConfig, PolicySpec } from '../core/policies/index.js';
import type { EngineProfile } from '../engine/types.js';
import { policyResult, type PolicyResult } from '../report/results.js';
import type { Scenario, ScenarioBackend } from '../scenario/types.js';
import { traceWorkload, type TraceParams } from '../workloads/trace.js';
import { policyLabel, simulate } from './simulator.js';

export interface TraceJob {
  readonly trace: TraceParams;
  readonly fleet: readonly {
    readonly name: string;
    readonly profile: EngineProfile;
    readonly models: readonly string[];
    readonly maxConcurrency: number;
    readonly weight: number;
  }[];
  readonly policy: PolicySpec;
  readonly scheduling?: EndpointPickerConfig | undefined;
  readonly seed: number;
  /** Sends stop here (past the trace's last request); the run then drains for graceS. */
  readonly durationS: number;
  readonly graceS: number;
  /** The parent's check pass found the trace in time order (TraceStats.inOrder): no reorder window. */
  readonly inOrder?: boolean | undefined;
}

export interface TraceJobResult {
  readonly policy: string;
  readonly replicas: number;
  readonly result: PolicyResult;
  /** Sorted end-to-end latencies of completed requests, thinned to at most CDF_POINTS + 1. */
  readonly latencyCdf: readonly number[];
  readonly ttftCdf: readonly number[];
  /** Wall-clock seconds the simulation took (not the summary). */
  readonly wallS: number;
  readonly requests: number;
}

const CDF_POINTS = 400;

function thinSorted(xs: number[]): number[] {
  xs.sort((a, b) => a - b);
  if (xs.length <= CDF_POINTS) return xs;
  const out: number[] = [];
  for (let i = 0; i < CDF_POINTS; i++) out.push(xs[Math.floor((i * xs.length) / CDF_POINTS)]!);
  out.push(xs[xs.length - 1]!);
  return out;
}

/** The scenario a job describes (the trace is read again, streamed, by each run). */
export function traceJobScenario(job: TraceJob): Scenario {
  const trace = { ...job.trace, durationS: job.durationS };
  return {
    name: 'whatif',
    seed: job.seed,
    fleet: job.fleet as readonly ScenarioBackend[],
    durationS: job.durationS,
    graceS: job.graceS,
    policies: [job.policy],
    scheduling: job.scheduling,
    timeScale: 1,
    // The check pass already ran in the parent: a worker's replay trusts the file.
    createDriver: (seed) => traceWorkload(trace, seed, { check: false, inOrder: job.inOrder }),
  };
}

export function runTraceJob(job: TraceJob): TraceJobResult {
  const scenario = traceJobScenario(job);
  const t0 = performance.now();
  // No queue samples (whatif draws no queue charts): they cost time on long traces.
  const run = simulate(scenario, job.policy, { seed: job.seed, sampleEveryS: Infinity });
  const wallS = (performance.now() - t0) / 1000;
  let queries = 0;
  let hits = 0;
  for (const b of run.backends) {
    queries += b.prefixQueries;
    hits += b.prefixHits;
  }
  const result = policyResult(
    policyLabel(job.policy),
    run.records,
    job.fleet.map((b) => b.name),
    { queries, hits },
  );
  const lat: number[] = [];
  const ttft: number[] = [];
  for (const r of run.records) {
    if (r.ok !== true || r.finishS === undefined) continue;
    lat.push(r.finishS - r.arrivalS);
    if (r.firstTokenS !== undefined) ttft.push(r.firstTokenS - r.arrivalS);
  }
  return {
    policy: result.name,
    replicas: job.fleet.length,
    result,
    latencyCdf: thinSorted(lat),
    ttftCdf: thinSorted(ttft),
    wallS,
    requests: run.records.length,
  };
}
