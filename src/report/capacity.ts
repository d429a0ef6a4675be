/**
 * A load sweep's capacity summary (`llmlb simulate|whatif --rate-scale 1,2,3,4`): every series (a
 * policy, or `policy@replicas` in whatif) at every load multiple — mean E2E, TTFT p90, prefix hit
 * rate, each against the best series at that multiple — and where each series breaks.
 *
 * "Where it breaks" is a bar every series is held to, not each against its own light load (a policy
 * already slow at ×1 would otherwise look robust): by default a series holds at ×k while it completes
 * ≥ 99 % of what was sent and its mean E2E stays within 2× the best mean E2E of any series at the
 * lowest multiple swept — queueing has at most doubled the light-load response time. whatif passes
 * its --slo instead when one is given. A series "holds to" the highest multiple up to which it held
 * at every multiple swept.
 */
import type { PolicyResult } from './results.js';
import { formatTable } from './table.js';

/** One run of a sweep: a series at a multiple. */
export interface SweepRun {
  readonly series: string;
  readonly rateScale: number;
  readonly result: PolicyResult;
}

export interface CapacityPoint {
  readonly series: string;
  readonly rateScale: number;
  readonly sent: number;
  readonly completionRate: number;
  readonly throughputRps: number;
  readonly meanE2eS: number;
  readonly ttftP90S: number;
  readonly prefixHitRate: number | null;
  /** Mean E2E ÷ the best series' at this multiple (1 = the best; null: nothing completed). */
  readonly e2eVsBest: number | null;
  readonly ttftP90VsBest: number | null;
  /** Meets the bar at this multiple. */
  readonly holds: boolean;
}

export interface SeriesCapacity {
  readonly series: string;
  /** Highest multiple up to which every multiple held (null: broke at the lowest). */
  readonly holdsTo: number | null;
  /** First multiple that broke the bar (null: held at every multiple swept). */
  readonly breaksAt: number | null;
}

export interface SweepSection {
  /** Ascending. */
  readonly rateScales: readonly number[];
  /** The bar, in words. */
  readonly bar: string;
  readonly points: readonly CapacityPoint[];
  readonly capacity: readonly SeriesCapacity[];
}

/** A bar given by the caller (whatif's --slo): its test and its words. */
export interface SweepBar {
  readonly text: string;
  holds(r: PolicyResult): boolean;
}

/** Runs completing fewer than this share of what was sent break the default bar. */
export const MIN_COMPLETION = 0.99;
/** The default bar: mean E2E within this factor of the best mean E2E at the lowest multiple. */
export const E2E_FACTOR = 2;

/** The default bar for runs whose lowest-multiple best mean E2E is `referenceS`. */
export function defaultBar(referenceS: number): SweepBar {
  const limit = E2E_FACTOR * referenceS;
  return {
    text:
      `completes ≥ ${MIN_COMPLETION * 100} % and mean E2E ≤ ${E2E_FACTOR}× the best at the lowest load ` +
      `(${limit.toFixed(3)} s)`,
    holds: (r) => r.completionRate >= MIN_COMPLETION && r.completed > 0 && r.latencyS.mean <= limit,
  };
}

const ratio = (x: number, best: number): number | null =>
  !Number.isFinite(best) ? null : best > 0 ? x / best : x <= 0 ? 1 : null;

/** The summary of `runs` (any order); `bar` defaults to defaultBar at the lowest multiple. */
export function capacitySweep(runs: readonly SweepRun[], bar?: SweepBar): SweepSection {
  const rateScales = [...new Set(runs.map((r) => r.rateScale))].sort((a, b) => a - b);
  const series = [...new Set(runs.map((r) => r.series))];
  const done = (r: SweepRun): boolean => r.result.completed > 0;
  const bestAt = new Map<number, { e2e: number; ttft: number }>();
  for (const k of rateScales) {
    const at = runs.filter((r) => r.rateScale === k && done(r));
    bestAt.set(k, {
      e2e: Math.min(...at.map((r) => r.result.latencyS.mean)),
      ttft: Math.min(...at.map((r) => r.result.ttftS.p90)),
    });
  }
  const theBar = bar ?? defaultBar(bestAt.get(rateScales[0]!)?.e2e ?? Infinity);
  const points: CapacityPoint[] = [];
  // Series in first-seen order, multiples ascending.
  for (const s of series)
    for (const k of rateScales) {
      const r = runs.find((x) => x.series === s && x.rateScale === k);
      if (!r) continue;
      const x = r.result;
      const best = bestAt.get(k)!;
      points.push({
        series: s,
        rateScale: k,
        sent: x.sent,
        completionRate: x.completionRate,
        throughputRps: x.throughputRps,
        meanE2eS: x.latencyS.mean,
        ttftP90S: x.ttftS.p90,
        prefixHitRate: x.prefixHitRate,
        e2eVsBest: done(r) ? ratio(x.latencyS.mean, best.e2e) : null,
        ttftP90VsBest: done(r) ? ratio(x.ttftS.p90, best.ttft) : null,
        holds: theBar.holds(x),
      });
    }
  const capacity = series.map((s): SeriesCapacity => {
    let holdsTo: number | null = null;
    for (const p of points.filter((q) => q.series === s)) {
      if (!p.holds) return { series: s, holdsTo, breaksAt: p.rateScale };
      holdsTo = p.rateScale;
    }
    return { series: s, holdsTo, breaksAt: null };
  });
  return { rateScales, bar: theBar.text, points, capacity };
}

/** `×2`, `×1.5`. */
export const times = (k: number): string => `×${k}`;

const sec = (x: number): string => x.toFixed(3);
const pct = (x: number | null): string => (x === null ? '-' : (x * 100).toFixed(1));
const rat = (x: number | null): string => (x === null ? '-' : x.toFixed(2));

/** One row per series × multiple: the figures and the ratios to the best at that multiple. */
export function capacityTable(sweep: SweepSection): string {
  const rows = sweep.points.map((p) => [
    p.series,
    times(p.rateScale),
    String(p.sent),
    pct(p.completionRate),
    p.throughputRps.toFixed(2),
    sec(p.meanE2eS),
    rat(p.e2eVsBest),
    sec(p.ttftP90S),
    rat(p.ttftP90VsBest),
    pct(p.prefixHitRate),
    p.holds ? 'yes' : 'no',
  ]);
  return formatTable(
    [
      'policy',
      'load',
      'sent',
      'done %',
      'req/s',
      'e2e mean s',
      '÷ best',
      'ttft p90 s',
      '÷ best',
      'prefix hit %',
      'holds',
    ],
    rows,
    { left: [0] },
  );
}

/** "where it breaks": one line per series. */
export function capacityLines(sweep: SweepSection): string[] {
  return [
    `where it breaks (bar: ${sweep.bar}):`,
    ...sweep.capacity.map(
      (c) =>
        `  ${c.series}: ` +
        (c.breaksAt === null
          ? `holds at every load swept (up to ${times(sweep.rateScales.at(-1)!)})`
          : c.holdsTo === null
            ? `breaks already at ${times(c.breaksAt)}`
            : `holds to ${times(c.holdsTo)}, breaks at ${times(c.breaksAt)}`),
    ),
  ];
}
