import type { PolicyResult, Results } from './results.js';

/** Fixed-width text table. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

const f = (x: number, d = 2): string => x.toFixed(d);

/**
 * The comparison table in the shape of seed 000 Tables 3 and 4: sent, completed within the test,
 * completion time, wait (mean/min/median/max/p90/p95), throughput — plus TTFT and prefix hits.
 */
export function comparisonTable(results: Results): string {
  const rows = results.policies.map((p: PolicyResult) => [
    p.name,
    String(p.sent),
    String(p.completed),
    p.completed === p.sent ? f(p.makespanS, 0) : 'N/A',
    f(p.latencyS.mean),
    f(p.latencyS.min),
    f(p.latencyS.p50),
    f(p.latencyS.max),
    f(p.latencyS.p90),
    f(p.latencyS.p95),
    p.throughputRps.toExponential(3),
    f(p.ttftS.p50),
    f(p.ttftS.p90),
    p.prefixHitRate === null ? '-' : f(p.prefixHitRate, 3),
  ]);
  return formatTable(
    [
      'policy',
      'sent',
      'done',
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

/** Each backend's share of requests and when it finished its last one. */
export function backendTable(results: Results): string {
  const rows: string[][] = [];
  for (const p of results.policies) {
    for (const b of p.perBackend) rows.push([p.name, b.name, String(b.requests), f(b.busyS, 1), f(b.lastFinishS, 1)]);
  }
  return formatTable(['policy', 'backend', 'requests', 'busy s', 'last finish s'], rows);
}
