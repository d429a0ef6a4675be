import type { RunResult } from './simulator.js';
import { formatTable } from '../report/table.js';

/**
 * Seed 004's per-class view: for each policy and request class (LL / LH / HL / HH, the suffix of
 * a task-mix label `task/CLASS`; "all" for every request), mean and p90 end-to-end latency, mean
 * TTFT, mean time between tokens, and mean router wait (arrival → dispatch), in seconds.
 * Empty when no request carries a class (other workloads).
 */
export function classTable(runs: readonly RunResult[]): string {
  const rows: string[][] = [];
  const mean = (xs: number[]): number => (xs.length > 0 ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
  const p90 = (xs: number[]): number => {
    if (xs.length === 0) return NaN;
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.ceil(0.9 * s.length) - 1)]!;
  };
  const f = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '-');
  let any = false;
  for (const r of runs) {
    const groups = new Map<string, (typeof r.records)[number][]>([['all', []]]);
    for (const rec of r.records) {
      if (rec.ok !== true) continue;
      groups.get('all')!.push(rec);
      const m = rec.label === undefined ? null : /\/(LL|LH|HL|HH)$/.exec(rec.label);
      if (!m) continue;
      any = true;
      let g = groups.get(m[1]!);
      if (!g) groups.set(m[1]!, (g = []));
      g.push(rec);
    }
    for (const cls of ['all', 'LL', 'LH', 'HL', 'HH']) {
      const g = groups.get(cls);
      if (!g || g.length === 0) continue;
      const e2e = g.map((x) => x.finishS! - x.arrivalS);
      const ttft = g.filter((x) => x.firstTokenS !== undefined).map((x) => x.firstTokenS! - x.arrivalS);
      const tbt = g
        .filter((x) => x.firstTokenS !== undefined && x.outputTokens > 1)
        .map((x) => (x.finishS! - x.firstTokenS!) / (x.outputTokens - 1));
      const wait = g.filter((x) => x.dispatchS !== undefined).map((x) => x.dispatchS! - x.arrivalS);
      rows.push([
        r.policy,
        cls,
        String(g.length),
        f(mean(e2e)),
        f(p90(e2e)),
        f(mean(ttft)),
        (mean(tbt) * 1000).toFixed(1),
        f(mean(wait)),
      ]);
    }
  }
  if (!any) return '';
  return formatTable(
    ['policy', 'class', 'done', 'e2e mean', 'e2e p90', 'ttft mean', 'tbt ms', 'router wait'],
    rows,
  );
}
