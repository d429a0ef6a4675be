import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type * as vl from 'vega-lite';
import type { RecordLike } from './results.js';

/** What the charts need of one policy's run. */
export interface ChartRun {
  readonly policy: string;
  readonly records: readonly RecordLike[];
  /** Outstanding requests per backend over time; derived from the records when absent (live runs). */
  readonly samples?: readonly { t: number; backend: string; outstanding: number }[];
  /** Requests held in the router's own queue over time (simulated runs); drawn as one more line. */
  readonly routerSamples?: readonly { t: number; queued: number }[];
}

/** Series name of the router queue in the queue chart (not a backend name: parenthesized). */
export const ROUTER_QUEUE = '(router queue)';

type Row = Record<string, string | number>;

/** Down-sample a series to at most n points (charts of 10k points render slowly and read no better). */
function thin<T>(xs: readonly T[], n: number): T[] {
  if (xs.length <= n) return [...xs];
  const out: T[] = [];
  const step = xs.length / n;
  for (let i = 0; i < n; i++) out.push(xs[Math.floor(i * step)]!);
  out.push(xs[xs.length - 1]!);
  return out;
}

function completions(run: ChartRun): { t: number; latency: number }[] {
  return run.records
    .filter((r) => r.ok === true && r.finishS !== undefined)
    .map((r) => ({ t: r.finishS!, latency: r.finishS! - r.arrivalS }))
    .sort((a, b) => a.t - b.t);
}

export function latencyCdf(runs: readonly ChartRun[]): Row[] {
  const rows: Row[] = [];
  for (const run of runs) {
    const lat = completions(run)
      .map((c) => c.latency)
      .sort((a, b) => a - b);
    const pts = lat.map((l, i) => ({ policy: run.policy, latencyS: l, fraction: (i + 1) / lat.length }));
    rows.push(...thin(pts, 300));
  }
  return rows;
}

/** OllamaRouter Figures 3–5: cumulative mean wait, completion rate and cumulative throughput over time. */
export function overTime(runs: readonly ChartRun[]): Row[] {
  const rows: Row[] = [];
  for (const run of runs) {
    const sent = run.records.length;
    const start = run.records.reduce((m, r) => Math.min(m, r.arrivalS), Infinity);
    let sum = 0;
    const pts = completions(run).map((c, i) => {
      sum += c.latency;
      const elapsed = Math.max(1e-9, c.t - start);
      return {
        policy: run.policy,
        t: c.t,
        meanWaitS: sum / (i + 1),
        completionRate: (i + 1) / sent,
        throughputRps: (i + 1) / elapsed,
      };
    });
    rows.push(...thin(pts, 400));
  }
  return rows;
}

/**
 * Heimdall's figure: each backend's queue (requests pushed to it and not finished: the engine's
 * running batch plus its pending queue) over time, plus the router's own queue, one panel per policy.
 */
export function queues(runs: readonly ChartRun[]): Row[] {
  const rows: Row[] = [];
  for (const run of runs) {
    if (run.samples) {
      for (const s of thin(run.samples, 4000)) {
        rows.push({ policy: run.policy, t: s.t, backend: s.backend, outstanding: s.outstanding });
      }
      // Only when the router ever held anything: a flat zero line adds nothing.
      if (run.routerSamples?.some((s) => s.queued > 0)) {
        for (const s of thin(run.routerSamples, 1000)) {
          rows.push({ policy: run.policy, t: s.t, backend: ROUTER_QUEUE, outstanding: s.queued });
        }
      }
      continue;
    }
    // Live: +1 at arrival, −1 at finish, per backend; a step series.
    const steps: { t: number; backend: string; d: number }[] = [];
    for (const r of run.records) {
      if (r.backend === undefined) continue;
      steps.push({ t: r.arrivalS, backend: r.backend, d: 1 });
      if (r.finishS !== undefined) steps.push({ t: r.finishS, backend: r.backend, d: -1 });
    }
    steps.sort((a, b) => a.t - b.t || a.d - b.d);
    const level = new Map<string, number>();
    const pts: Row[] = [];
    for (const s of steps) {
      const v = (level.get(s.backend) ?? 0) + s.d;
      level.set(s.backend, v);
      pts.push({ policy: run.policy, t: s.t, backend: s.backend, outstanding: v });
    }
    rows.push(...thin(pts, 4000));
  }
  return rows;
}

function lineSpec(
  title: string,
  data: Row[],
  x: string,
  xTitle: string,
  y: string,
  yTitle: string,
  color: string,
): vl.TopLevelSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    width: 560,
    height: 300,
    data: { values: data },
    mark: { type: 'line', interpolate: 'step-after' },
    encoding: {
      x: { field: x, type: 'quantitative', title: xTitle },
      y: { field: y, type: 'quantitative', title: yTitle },
      color: { field: color, type: 'nominal' },
    },
  } as vl.TopLevelSpec;
}

let chartModules: Promise<[typeof import('vega'), typeof import('vega-lite')]> | undefined;

/** vega and vega-lite, imported once on first use: `serve` never draws, and vega is optional. */
function loadChartModules(): Promise<[typeof import('vega'), typeof import('vega-lite')]> {
  chartModules ??= Promise.all([import('vega'), import('vega-lite')]).catch((err: unknown) => {
    throw new Error(
      `charts need the optional packages vega and vega-lite (npm install vega vega-lite): ${String(err)}`,
    );
  });
  return chartModules;
}

/**
 * Start importing vega now (about 0.5 s of CPU), e.g. while a core would otherwise idle; a
 * failure is reported by the first renderSvg.
 */
export function preloadCharts(): void {
  loadChartModules().catch(() => undefined);
}

export async function renderSvg(spec: vl.TopLevelSpec): Promise<string> {
  const [vega, vegaLite] = await loadChartModules();
  const compiled = vegaLite.compile(spec).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Write the five charts as SVG into `dir`; returns the file names. */
export async function writeCharts(dir: string, title: string, runs: readonly ChartRun[]): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const t = overTime(runs);
  const specs: [string, vl.TopLevelSpec][] = [
    [
      'latency-cdf.svg',
      lineSpec(
        `${title}: latency CDF`,
        latencyCdf(runs),
        'latencyS',
        'latency (s)',
        'fraction',
        'fraction of requests',
        'policy',
      ),
    ],
    [
      'cumulative-throughput.svg',
      lineSpec(
        `${title}: cumulative throughput`,
        t,
        't',
        'time (s)',
        'throughputRps',
        'completed / elapsed (req/s)',
        'policy',
      ),
    ],
    [
      'completion-rate.svg',
      lineSpec(
        `${title}: completion rate`,
        t,
        't',
        'time (s)',
        'completionRate',
        'completed / sent',
        'policy',
      ),
    ],
    [
      'cumulative-mean-wait.svg',
      lineSpec(`${title}: cumulative mean wait`, t, 't', 'time (s)', 'meanWaitS', 'mean wait (s)', 'policy'),
    ],
  ];
  const q = queues(runs);
  specs.push([
    'queue-per-backend.svg',
    {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: `${title}: requests queued or running per backend`,
      data: { values: q },
      facet: { row: { field: 'policy', type: 'nominal' } },
      spec: {
        width: 560,
        height: 140,
        mark: { type: 'line', interpolate: 'step-after' },
        encoding: {
          x: { field: 't', type: 'quantitative', title: 'time (s)' },
          y: { field: 'outstanding', type: 'quantitative', title: 'queued + running' },
          color: { field: 'backend', type: 'nominal', title: 'backend' },
        },
      },
    } as vl.TopLevelSpec,
  ]);
  const names: string[] = [];
  for (const [name, spec] of specs) {
    writeFileSync(join(dir, name), await renderSvg(spec));
    names.push(name);
  }
  return names;
}
