import { test } from 'node:test';
import assert from 'node:assert/strict';
import { oracleSummary, policyResult, type Results } from './results.js';
import { backendTable, comparisonTable, formatTable, localityTable, oracleTable } from './table.js';

const rec = (
  id: string,
  arrivalS: number,
  finishS: number | undefined,
  ok: boolean | undefined,
  backend = 'x',
) => ({
  id,
  arrivalS,
  firstTokenS: finishS,
  finishS,
  backend,
  ok,
});

const results = (): Results => ({
  scenario: 's',
  seed: 1,
  mode: 'simulate',
  policies: [
    policyResult('all-done', [rec('a', 0, 2, true), rec('b', 1, 4, true, 'y')], ['x', 'y'], undefined),
    policyResult('half', [rec('a', 0, 3, true), rec('b', 1, undefined, undefined)], ['x', 'y'], {
      queries: 4,
      hits: 1,
    }),
  ],
  oracle: oracleSummary({
    evaluated: 4,
    best: { meanLatencyS: 2, assignment: ['x', 'y'] },
    worst: { meanLatencyS: 4, assignment: ['x', 'x'] },
    randomMeanLatencyS: 3,
  }),
});

test('formatTable pads columns: first left-aligned, others right-aligned', () => {
  assert.equal(formatTable(['a', 'bb'], [['xyz', '1']]), 'a    bb\n---  --\nxyz   1');
  assert.equal(formatTable(['n', 'name'], [['10', 'ab']], { left: [1] }), ' n  name\n--  ----\n10  ab  ');
  assert.equal(formatTable(['a', 'b'], [['1']]), 'a  b\n-  -\n1', 'a short row ends early');
});

test('comparison table: OllamaRouter columns; completion time N/A unless all completed', () => {
  const t = comparisonTable(results());
  const [head, , first, second] = t.split('\n');
  assert.match(
    head!,
    /^policy +sent +done +failed +complete s +wait mean +min +median +max +p90 +p95 +req\/s +ttft p50 +ttft p90 +prefix hit$/,
  );
  assert.match(first!, /^all-done +2 +2 +0 +4\.0 +2\.50 +2\.00 +2\.00 +3\.00 +3\.00 +3\.00 +0\.5000 .* -$/);
  assert.match(second!, /^half +2 +1 +0 +N\/A +3\.00 .* 0\.250$/);
  assert.match(backendTable(results()), /all-done +y +1 +3\.0 +4\.0/);
});

test('oracle table places each policy between best (0%) and worst (100%)', () => {
  const t = oracleTable(results());
  assert.match(t, /^oracle: 4 assignments simulated; best x,y/);
  assert.match(t, /oracle best +2\.000 +\+0\.0% +0\.0%/);
  assert.match(t, /random assignment \(expected\) +3\.000 +\+50\.0% +50\.0%/);
  assert.match(t, /all-done +2\.500 +\+25\.0% +25\.0%/);
  assert.match(t, /half +N\/A/);
  assert.equal(oracleTable({ ...results(), oracle: undefined }), '');
});

test('locality table: throughput, TTFT and e2e p50/p90/mean, prefix hits, outstanding spread', () => {
  const samples = [
    { t: 0, backend: 'x', outstanding: 3 },
    { t: 0, backend: 'y', outstanding: 1 },
  ];
  const r: Results = {
    scenario: 's',
    seed: 1,
    mode: 'bench',
    policies: [
      policyResult(
        'spread',
        [rec('a', 0, 2, true), rec('b', 1, 4, true, 'y')],
        ['x', 'y'],
        undefined,
        samples,
      ),
      policyResult('no-samples', [rec('a', 0, 3, true)], ['x', 'y'], { queries: 4, hits: 1 }),
    ],
  };
  const [head, , first, second] = localityTable(r).split('\n');
  assert.match(
    head!,
    /^policy +done +req\/s +ttft p50 +p90 +mean +e2e p50 +p90 +mean +prefix hit +out\/backend +max-min +cv +max\/mean +pending$/,
  );
  // ttft = e2e here (firstTokenS = finishS): p50 2, p90 3, mean 2.5; spread 3 vs 1: mean 2, gap 2, cv .5, peak 1.5.
  assert.match(
    first!,
    /^spread +2\/2 +0\.5000 +2\.00 +3\.00 +2\.50 +2\.00 +3\.00 +2\.50 +- +2\.0 +2\.0 +0\.50 +1\.50 +-$/,
  );
  assert.match(second!, /^no-samples +1\/1 .* 0\.250 +- +- +- +- +-$/);
});
