import type { PolicyResult, Results } from './results.js';

export interface TableOptions {
  /** Columns aligned left (names); the others align right (figures). Default: the first. */
  readonly left?: readonly number[];
}

/** Fixed-width text table: the one formatter for reports, commands and benches. */
export function formatTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  opts: TableOptions = {},
): string {
  const left = new Set(opts.left ?? [0]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells.map((c, i) => (left.has(i) ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

const f = (x: number, d = 2): string => x.toFixed(d);

/**
 * The comparison table in the shape of OllamaRouter Tables 3 and 4: sent, completed within the test,
 * completion time, wait (mean/min/median/max/p90/p95), throughput — plus TTFT and prefix hits.
 */
export function comparisonTable(results: Results): string {
  const rows = results.policies.map((p: PolicyResult) => [
    p.name,
    String(p.sent),
    String(p.completed),
    String(p.failed),
    p.completed === p.sent ? f(p.makespanS, 1) : 'N/A',
    f(p.latencyS.mean),
    f(p.latencyS.min),
    f(p.latencyS.p50),
    f(p.latencyS.max),
    f(p.latencyS.p90),
    f(p.latencyS.p95),
    p.throughputRps.toPrecision(4),
    f(p.ttftS.p50),
    f(p.ttftS.p90),
    p.prefixHitRate === null ? '-' : f(p.prefixHitRate, 3),
  ]);
  return formatTable(
    [
      'policy',
      'sent',
      'done',
      'failed',
      'complete s',
      'wait mean',
      'min',
      'median',
      'max',
      'p90',
      'p95',
      'req/s',
      'ttft p50',
      'ttft p90',
      'prefix hit',
    ],
    rows,
  );
}

/**
 * SkyLB's view (§5.1): throughput, TTFT and end-to-end latency (p50/p90/mean), prefix-cache hit
 * rate, and how unevenly requests sat on the backends (time-averaged outstanding: mean per backend,
 * most − least loaded, coefficient of variation, most loaded / mean; and pending inside engines).
 */
export function localityTable(results: Results): string {
  const rows = results.policies.map((p: PolicyResult) => {
    const s = p.outstandingSpread;
    return [
      p.name,
      `${p.completed}/${p.sent}`,
      p.throughputRps.toPrecision(4),
      f(p.ttftS.p50),
      f(p.ttftS.p90),
      f(p.ttftS.mean),
      f(p.latencyS.p50),
      f(p.latencyS.p90),
      f(p.latencyS.mean),
      p.prefixHitRate === null ? '-' : f(p.prefixHitRate, 3),
      s ? f(s.mean, 1) : '-',
      s ? f(s.maxMinusMin, 1) : '-',
      s ? f(s.cv) : '-',
      s ? f(s.maxOverMean) : '-',
      s?.pending != null ? f(s.pending, 1) : '-',
    ];
  });
  return formatTable(
    [
      'policy',
      'done',
      'req/s',
      'ttft p50',
      'p90',
      'mean',
      'e2e p50',
      'p90',
      'mean',
      'prefix hit',
      'out/backend',
      'max-min',
      'cv',
      'max/mean',
      'pending',
    ],
    rows,
  );
}

/** Each backend's share of requests and when it finished its last one. */
export function backendTable(results: Results): string {
  const rows: string[][] = [];
  for (const p of results.policies) {
    for (const b of p.perBackend)
      rows.push([p.name, b.name, String(b.requests), f(b.busyS, 1), f(b.lastFinishS, 1)]);
  }
  return formatTable(['policy', 'backend', 'requests', 'busy s', 'last finish s'], rows);
}

/**
 * Each policy's mean latency placed between the oracle's best and worst achievable (the performance-aware router Fig. 2):
 * 0% is optimal routing, 100% the worst possible.
 */
export function oracleTable(results: Results): string {
  const o = results.oracle;
  if (!o) return '';
  const span = o.worstMeanLatencyS - o.bestMeanLatencyS;
  const place = (mean: number): string =>
    span > 0 ? `${f(((mean - o.bestMeanLatencyS) / span) * 100, 1)}%` : '-';
  const over = (mean: number): string =>
    o.bestMeanLatencyS > 0 ? `+${f(((mean - o.bestMeanLatencyS) / o.bestMeanLatencyS) * 100, 1)}%` : '-';
  const rows: string[][] = [
    ['oracle best', f(o.bestMeanLatencyS, 3), over(o.bestMeanLatencyS), place(o.bestMeanLatencyS)],
    [
      'random assignment (expected)',
      f(o.randomMeanLatencyS, 3),
      over(o.randomMeanLatencyS),
      place(o.randomMeanLatencyS),
    ],
    ['oracle worst', f(o.worstMeanLatencyS, 3), over(o.worstMeanLatencyS), place(o.worstMeanLatencyS)],
  ];
  for (const p of results.policies) {
    // Only comparable when the policy completed everything (the oracle's means are over all requests).
    const m = p.latencyS.mean;
    rows.push(p.completed === p.sent ? [p.name, f(m, 3), over(m), place(m)] : [p.name, 'N/A', '-', '-']);
  }
  return [
    `oracle: ${o.assignments} assignments simulated; best ${o.bestAssignment.join(',')}`,
    formatTable(['mean latency', 's', 'vs best', 'best→worst'], rows),
  ].join('\n');
}
