import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { capacityLines, capacitySweep, capacityTable, type SweepRun } from './capacity.js';
import { capacitySpec } from './capacity-charts.js';
import type { PolicyResult } from './results.js';

/** A result with what the sweep reads. */
function result(meanS: number, ttftP90S: number, completionRate = 1, hit: number | null = 0.5): PolicyResult {
  const s = { mean: meanS, min: 0, p50: meanS, p90: meanS, p95: meanS, p99: meanS, max: meanS };
  return {
    name: 'x',
    sent: 100,
    completed: Math.round(100 * completionRate),
    failed: 0,
    unfinished: 100 - Math.round(100 * completionRate),
    completionRate,
    makespanS: 10,
    throughputRps: 10,
    latencyS: s,
    ttftS: { ...s, p90: ttftP90S },
    prefixHitRate: hit,
    outstandingSpread: null,
    perBackend: [],
  };
}

const runs: SweepRun[] = [
  { series: 'a', rateScale: 2, result: result(1.5, 0.3) },
  { series: 'a', rateScale: 1, result: result(1, 0.2) },
  { series: 'a', rateScale: 4, result: result(5, 3) },
  { series: 'b', rateScale: 1, result: result(1.2, 0.1) },
  { series: 'b', rateScale: 2, result: result(1.8, 0.15) },
  { series: 'b', rateScale: 4, result: result(1.9, 0.2, 0.95) },
  { series: 'c', rateScale: 1, result: result(2.5, 1) },
  { series: 'c', rateScale: 2, result: result(1.9, 1) },
  { series: 'c', rateScale: 4, result: result(1.9, 1) },
];

describe('capacity sweep', () => {
  it('ratios to the best at each multiple; where each series breaks against one bar', () => {
    const s = capacitySweep(runs);
    assert.deepEqual(s.rateScales, [1, 2, 4]);
    const at = (series: string, k: number) => s.points.find((p) => p.series === series && p.rateScale === k)!;
    assert.equal(at('a', 1).e2eVsBest, 1);
    assert.equal(at('b', 1).e2eVsBest, 1.2);
    assert.equal(at('a', 1).ttftP90VsBest, 2);
    assert.equal(at('b', 4).e2eVsBest, 1); // the lowest mean at ×4, though it broke (completion)
    // The bar: mean E2E ≤ 2 × 1 s (the best at ×1) and ≥ 99 % completed.
    assert.match(s.bar, /2× the best at the lowest load \(2\.000 s\)/);
    assert.deepEqual(s.capacity, [
      { series: 'a', holdsTo: 2, breaksAt: 4 },
      { series: 'b', holdsTo: 2, breaksAt: 4 },
      // Broken at the lowest load stays broken, even when a later multiple passes.
      { series: 'c', holdsTo: null, breaksAt: 1 },
    ]);
    const lines = capacityLines(s).join('\n');
    assert.match(lines, /a: holds to ×2, breaks at ×4/);
    assert.match(lines, /c: breaks already at ×1/);
    assert.match(capacityTable(s), /^policy +load +sent +done % .*holds$/m);
    assert.match(capacityTable(s), /^a +×4 +100 +100\.0 +10\.00 +5\.000 +2\.63 +3\.000 +15\.00 +50\.0 +no$/m);
  });

  it('a caller bar (whatif --slo) replaces the default; a series holding everywhere says so', () => {
    const s = capacitySweep(runs, { text: 'ttft p90 ≤ 1 s', holds: (r) => r.ttftS.p90 <= 1 });
    assert.deepEqual(
      s.capacity.map((c) => [c.series, c.holdsTo, c.breaksAt]),
      [
        ['a', 2, 4],
        ['b', 4, null],
        ['c', 4, null],
      ],
    );
    assert.match(capacityLines(s).join('\n'), /b: holds at every load swept \(up to ×4\)/);
  });

  it('the chart: one line per series against the multiple, log latencies, hit rate when known', () => {
    const spec = capacitySpec('t', capacitySweep(runs)) as unknown as {
      vconcat: { encoding: { y: { field: string; scale: { type?: string } } } }[];
      data: { values: { series: string }[] };
    };
    assert.deepEqual(
      spec.vconcat.map((p) => p.encoding.y.field),
      ['meanE2eS', 'ttftP90S', 'prefixHitPct'],
    );
    assert.equal(spec.vconcat[0]!.encoding.y.scale.type, 'log');
    assert.equal(spec.data.values.length, 9);
    const noHits = runs.map((r) => ({ ...r, result: { ...r.result, prefixHitRate: null } }));
    assert.equal(
      (capacitySpec('t', capacitySweep(noHits)) as unknown as { vconcat: unknown[] }).vconcat.length,
      2,
    );
  });
});
