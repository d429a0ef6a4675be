/**
 * `llmlb whatif` charts: the latency and TTFT CDF of each policy (one panel per replica count) and
 * p90 TTFT against replicas per policy, with the SLO as a rule when one is given.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type * as vl from 'vega-lite';
import { renderSvg } from './charts.js';

export interface WhatifChartRun {
  readonly policy: string;
  readonly replicas: number;
  /** Sorted values (thinned). */
  readonly latencyCdf: readonly number[];
  readonly ttftCdf: readonly number[];
  readonly ttftP90: number;
}

const SCHEMA = 'https://vega.github.io/schema/vega-lite/v6.json';

function cdfRows(runs: readonly WhatifChartRun[], pick: (r: WhatifChartRun) => readonly number[]) {
  const rows: { policy: string; replicas: string; s: number; fraction: number }[] = [];
  for (const r of runs) {
    const xs = pick(r);
    xs.forEach((s, i) =>
      rows.push({ policy: r.policy, replicas: `${r.replicas} replicas`, s, fraction: (i + 1) / xs.length }),
    );
  }
  return rows;
}

function cdfSpec(title: string, rows: ReturnType<typeof cdfRows>, xTitle: string): vl.TopLevelSpec {
  return {
    $schema: SCHEMA,
    title,
    data: { values: rows },
    facet: { row: { field: 'replicas', type: 'nominal', title: null } },
    spec: {
      width: 560,
      height: 220,
      mark: { type: 'line', interpolate: 'step-after' },
      encoding: {
        x: { field: 's', type: 'quantitative', title: xTitle, scale: { type: 'symlog' } },
        y: { field: 'fraction', type: 'quantitative', title: 'fraction of requests' },
        color: { field: 'policy', type: 'nominal' },
      },
    },
  } as vl.TopLevelSpec;
}

/** Write the three charts into `dir`; returns their file names. */
export async function writeWhatifCharts(
  dir: string,
  title: string,
  runs: readonly WhatifChartRun[],
  slo?: { label: string; ttftP90S?: number | undefined },
): Promise<string[]> {
  const p90 = runs.map((r) => ({ policy: r.policy, replicas: r.replicas, ttftP90S: r.ttftP90 }));
  const layers: unknown[] = [
    {
      mark: { type: 'line', point: true },
      encoding: {
        x: { field: 'replicas', type: 'quantitative', title: 'replicas' },
        y: { field: 'ttftP90S', type: 'quantitative', title: 'p90 TTFT (s)', scale: { type: 'symlog' } },
        color: { field: 'policy', type: 'nominal' },
      },
    },
  ];
  if (slo?.ttftP90S !== undefined)
    layers.push({
      data: { values: [{ y: slo.ttftP90S }] },
      mark: { type: 'rule', strokeDash: [4, 4], color: 'red' },
      encoding: { y: { field: 'y', type: 'quantitative' } },
    });
  const specs: [string, vl.TopLevelSpec][] = [
    [
      'latency-cdf.svg',
      cdfSpec(
        `${title}: end-to-end latency CDF`,
        cdfRows(runs, (r) => r.latencyCdf),
        'latency (s)',
      ),
    ],
    [
      'ttft-cdf.svg',
      cdfSpec(
        `${title}: TTFT CDF`,
        cdfRows(runs, (r) => r.ttftCdf),
        'time to first token (s)',
      ),
    ],
    [
      'ttft-p90-vs-replicas.svg',
      {
        $schema: SCHEMA,
        title: `${title}: p90 TTFT vs replicas${slo ? ` (SLO ${slo.label})` : ''}`,
        width: 560,
        height: 300,
        data: { values: p90 },
        layer: layers,
      } as vl.TopLevelSpec,
    ],
  ];
  const rendered = await Promise.all(specs.map(([, s]) => renderSvg(s)));
  specs.forEach(([name], i) => writeFileSync(join(dir, name), rendered[i]!));
  return specs.map(([name]) => name);
}
