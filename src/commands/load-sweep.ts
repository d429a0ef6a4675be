/**
 * Load sweeps shared by `llmlb simulate` and `llmlb whatif` (`--rate-scale 1,2,3,4`): the list
 * parsed and checked, every job at every multiple handed to the caller's pool in one batch (so
 * `--threads` spreads policy × multiple), and the capacity summary, table and chart
 * (src/report/capacity.ts). What ×k means per workload: src/workloads/load-scale.ts.
 */
import { CAPACITY_CHART, writeCapacityChart } from '../report/capacity-charts.js';
import {
  capacityLines,
  capacitySweep,
  capacityTable,
  type SweepBar,
  type SweepRun,
  type SweepSection,
} from '../report/capacity.js';
import { UsageError } from './usage-error.js';

/** Checked multiples: finite and positive, each once, ascending. UsageError naming `flag` otherwise. */
export function checkRateScales(list: readonly number[], flag = '--rate-scale'): number[] {
  if (list.length === 0) throw new UsageError(`${flag} needs at least one load multiple, e.g. 1,2,3,4`);
  for (const k of list)
    if (typeof k !== 'number' || !Number.isFinite(k) || k <= 0)
      throw new UsageError(
        `${flag}: load multiples must be positive numbers, e.g. 1,2,3,4; got ${String(k)}`,
      );
  return [...new Set(list)].sort((a, b) => a - b);
}

/** `1,2,3,4` → [1, 2, 3, 4]; empty, non-numeric, zero or negative entries → UsageError. */
export function parseRateScales(text: string, flag = '--rate-scale'): number[] {
  const parts = text.split(',').map((s) => s.trim());
  if (parts.every((s) => s === ''))
    throw new UsageError(`${flag} needs at least one load multiple, e.g. 1,2,3,4`);
  return checkRateScales(
    parts.map((s) => {
      const k = s === '' ? NaN : Number(s);
      if (!Number.isFinite(k) || k <= 0)
        throw new UsageError(`${flag}: load multiples must be positive numbers, e.g. 1,2,3,4; got '${s}'`);
      return k;
    }),
    flag,
  );
}

/** The jobs of one multiple, and what they returned. */
export interface SweepStep<R> {
  readonly rateScale: number;
  readonly results: R[];
}

/**
 * Every multiple's jobs in one batch through `run` (a worker pool spreads them all), results
 * regrouped by multiple, in the order of `rateScales`.
 */
export async function runSweep<J, R>(
  rateScales: readonly number[],
  jobsAt: (rateScale: number) => J[],
  run: (jobs: J[]) => Promise<R[]>,
): Promise<SweepStep<R>[]> {
  const groups = rateScales.map((k) => ({ rateScale: k, jobs: jobsAt(k) }));
  const all = await run(groups.flatMap((g) => g.jobs));
  let at = 0;
  return groups.map((g) => {
    const results = all.slice(at, at + g.jobs.length);
    at += g.jobs.length;
    return { rateScale: g.rateScale, results };
  });
}

export interface SweepReport {
  readonly sweep: SweepSection;
  /** The capacity table and where each series breaks, for the command's output. */
  readonly lines: string[];
  /** The chart's file name, when charts were asked for. */
  readonly chart?: string;
}

/** The capacity summary of `runs`, its text and (unless `charts` is false) its chart in `out`. */
export async function sweepReport(opts: {
  readonly runs: readonly SweepRun[];
  readonly bar?: SweepBar | undefined;
  readonly out: string;
  readonly title: string;
  readonly charts: boolean;
}): Promise<SweepReport> {
  const sweep = capacitySweep(opts.runs, opts.bar);
  const lines = [
    'capacity (each run against the best policy at its load):',
    capacityTable(sweep),
    '',
    ...capacityLines(sweep),
  ];
  if (!opts.charts) return { sweep, lines };
  await writeCapacityChart(opts.out, opts.title, sweep);
  return { sweep, lines, chart: CAPACITY_CHART };
}
