/**
 * `llmlb whatif`'s table (one row per policy × replica count, with "meets SLO" given an SLO) and
 * its recommendation line.
 */
import { meetsSlo, type Recommendation, type SizedRun, type SloTerm } from './slo.js';
import { formatTable } from './table.js';

/** Seconds to the millisecond; a share in percent to a tenth. */
const sec = (x: number): string => x.toFixed(3);
const pct = (x: number): string => (x * 100).toFixed(1);

/** The recommendation in words: the fewest replicas meeting the SLO, or that none does. */
export function recommendationLine(
  rec: Recommendation | null,
  slo: readonly SloTerm[],
  replicas: readonly number[],
): string {
  if (rec)
    return slo.length > 0
      ? `recommendation: ${rec.policy} on ${rec.replicas} replicas — the fewest replicas meeting ${rec.slo} (${rec.reason})`
      : `recommendation: ${rec.policy} on ${rec.replicas} replicas (${rec.reason}; give --slo to size the fleet)`;
  return `recommendation: none — no policy meets ${slo.map((t) => t.text).join(', ')} with up to ${replicas.at(-1)} replicas`;
}

/** What one table row needs of a run. */
export type WhatifRow = SizedRun;

/** Seconds, rates and shares each at one precision, their units in the header. */
export function whatifTable(runs: readonly WhatifRow[], slo: readonly SloTerm[]): string {
  const head = [
    'replicas',
    'policy',
    'done %',
    'req/s',
    'ttft p50 s',
    'ttft p90 s',
    'e2e mean s',
    'e2e p90 s',
    'prefix hit %',
  ];
  if (slo.length > 0) head.push('meets SLO');
  const rows = runs.map((r) => {
    const x = r.result;
    const row = [
      String(r.replicas),
      r.policy,
      pct(x.completionRate),
      x.throughputRps.toFixed(2),
      sec(x.ttftS.p50),
      sec(x.ttftS.p90),
      sec(x.latencyS.mean),
      sec(x.latencyS.p90),
      x.prefixHitRate === null ? '-' : pct(x.prefixHitRate),
    ];
    if (slo.length > 0) row.push(meetsSlo(x, slo) ? 'yes' : 'no');
    return row;
  });
  return formatTable(head, rows, { left: [1] });
}
