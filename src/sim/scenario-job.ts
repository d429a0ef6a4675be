/**
 * One `llmlb simulate` run as plain data (so it can cross to a worker thread): a scenario file
 * under one policy and seed. The worker loads the file itself (a scenario's workload is code, not
 * data) and sends the whole run back: the report and charts need every record.
 */
import type { PolicySpec } from '../core/policies/index.js';
import { loadScenario } from '../scenario/load.js';
import type { Scenario } from '../scenario/types.js';
import { simulateFederation } from './federation.js';
import { simulate, type RunResult } from './simulator.js';

export interface ScenarioJob {
  /** As given on the command line (workers share the process's working directory). */
  readonly scenarioPath: string;
  readonly policy: PolicySpec;
  readonly seed: number;
  /** A load sweep's multiple of the scenario's load (absent: ×1, the file as written). */
  readonly rateScale?: number | undefined;
}

export interface ScenarioJobResult {
  readonly run: RunResult;
  /** Wall-clock seconds the simulation took. */
  readonly wallS: number;
}

/**
 * A thread's scenarios by path, loaded once: its runs then share what a scenario keeps between
 * runs of one seed, as they do when one thread runs them all.
 */
const loaded = new Map<string, Scenario>();

/** Runs `job` on `scenario` (the caller's, already loaded at the job's multiple) or on the file it names. */
export function runScenarioJob(job: ScenarioJob, scenario?: Scenario): ScenarioJobResult {
  const key =
    job.rateScale === undefined || job.rateScale === 1
      ? job.scenarioPath
      : `${job.scenarioPath}\0x${job.rateScale}`;
  let s = scenario ?? loaded.get(key);
  if (s === undefined) {
    s = loadScenario(job.scenarioPath, { rateScale: job.rateScale });
    loaded.set(key, s);
  }
  const t0 = performance.now();
  const multi = s.regions !== undefined || s.routers !== undefined;
  const run = multi
    ? simulateFederation(s, job.policy, { seed: job.seed })
    : simulate(s, job.policy, { seed: job.seed });
  return { run, wallS: (performance.now() - t0) / 1000 };
}
