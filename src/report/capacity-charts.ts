/**
 * A load sweep's capacity curves: mean E2E, TTFT p90 and prefix hit rate against the load multiple,
 * one line per series, in one SVG (three panels sharing the x axis). Latencies on a log scale: a
 * curve that breaks rises by orders of magnitude while the light-load differences stay readable.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type * as vl from 'vega-lite';
import type { SweepSection } from './capacity.js';
import { renderSvg } from './charts.js';

export const CAPACITY_CHART = 'capacity-curves.svg';

/** Vega-lite's log scale takes no zero: a latency that rounds to 0 is drawn at 1 ms. */
const FLOOR_S = 1e-3;

function panel(field: string, yTitle: string, scale: Record<string, unknown>, rateTitle: string): unknown {
  return {
    width: 560,
    height: 220,
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'rateScale', type: 'quantitative', title: rateTitle },
      y: { field, type: 'quantitative', title: yTitle, scale },
      color: { field: 'series', type: 'nominal', title: 'policy' },
    },
  };
}

/** The chart's vega-lite spec (exported for tests). */
export function capacitySpec(title: string, sweep: SweepSection): vl.TopLevelSpec {
  const rows = sweep.points.map((p) => ({
    series: p.series,
    rateScale: p.rateScale,
    meanE2eS: Math.max(FLOOR_S, p.meanE2eS),
    ttftP90S: Math.max(FLOOR_S, p.ttftP90S),
    ...(p.prefixHitRate !== null ? { prefixHitPct: p.prefixHitRate * 100 } : {}),
  }));
  const rateTitle = 'load (× the workload’s rate)';
  const panels = [
    panel('meanE2eS', 'mean E2E (s, log)', { type: 'log' }, rateTitle),
    panel('ttftP90S', 'TTFT p90 (s, log)', { type: 'log' }, rateTitle),
  ];
  // Hit rates only where the engines report them (a fleet without a prefix cache reports none).
  if (sweep.points.some((p) => p.prefixHitRate !== null))
    panels.push(panel('prefixHitPct', 'prefix hit %', { domain: [0, 100] }, rateTitle));
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: `${title}: capacity curves`,
    data: { values: rows },
    vconcat: panels,
  } as vl.TopLevelSpec;
}

/** Write the capacity-curve chart into `dir`; returns its file name. */
export async function writeCapacityChart(dir: string, title: string, sweep: SweepSection): Promise<string> {
  writeFileSync(join(dir, CAPACITY_CHART), await renderSvg(capacitySpec(title, sweep)));
  return CAPACITY_CHART;
}
