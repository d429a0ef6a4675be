import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { policyNames } from '../core/policies/index.js';
import { loadScenario } from '../scenario/load.js';
import { judge, losers, matrixPolicies, matrixTable, runCell, shortened, type MatrixCell } from './matrix.js';

const scenarios = join(import.meta.dirname, '..', '..', 'scenarios');

/**
 * The CI-sized matrix (issue #20): the default policy against both baselines on the trace-shaped
 * scenarios (shortened), OllamaRouter's and Heimdall's burst. It fails when the default loses to round
 * robin by more than 5 % on mean E2E anywhere — the regression issue #20 was — or to the better
 * baseline by more than 2 % (the goal).
 */
const SMALL: readonly [file: string, durationS: number | undefined][] = [
  ['trace-conversation-4x.yaml', 240],
  ['trace-code-4x.yaml', 300],
  ['trace-code-4x-high.yaml', 150],
  ['trace-conversation-unequal.yaml', 240],
  ['ollamarouter-2node.yaml', undefined],
  ['heimdall-burst.yaml', 120],
];

describe('policy matrix', () => {
  it('the default policy never loses to round robin by more than 5 % nor to the best baseline by more than 2 %; wins on the unequal fleet', () => {
    const cells: MatrixCell[] = [];
    for (const [file, durationS] of SMALL) {
      const s = shortened(loadScenario(join(scenarios, file)), durationS);
      for (const p of ['round-robin', 'least-connections', 'estimated-wait']) cells.push(runCell(s, p));
    }
    const judged = judge(cells);
    const table = matrixTable(judged);
    const lost = losers(
      judged.filter((j) => j.policy === 'estimated-wait'),
      0.05,
    );
    assert.deepEqual(lost, [], table);
    for (const j of judged.filter((j) => j.policy === 'estimated-wait'))
      assert.ok(j.e2eVsBest <= 1.02, `${j.scenario}: ${table}`);
    const unequal = judged.find(
      (j) => j.scenario === 'trace-conversation-unequal' && j.policy === 'estimated-wait',
    )!;
    assert.ok(unequal.e2eVsBest < 0.95, table);
    for (const c of cells.filter((c) => c.policy === 'estimated-wait'))
      assert.equal(c.completed, c.sent, `${c.policy} on ${c.scenario}: ${table}`);
  });

  it('prefix-heavy traffic (issue #30): the default keeps its locality as the load doubles', () => {
    // The four prefix-heavy scenarios (200 s) at ×1 and ×2 their rate. Before issue #30 the default
    // fell to least-connections' hit rate at ×2 (8–11× prefix-trie's mean E2E). Guarded here: it
    // stays near prefix-trie (the target is 1.05×; docs/results.md has where it stands) and
    // far from least-connections once load rises.
    const rows: string[] = [];
    const fails: string[] = [];
    for (const file of [
      'prefix-documents-8',
      'prefix-conversations-8',
      'prefix-agents-8',
      'prefix-unequal-8',
    ])
      for (const k of [1, 2]) {
        const s = shortened(loadScenario(join(scenarios, `${file}.yaml`), { rateScale: k }), 200);
        const [lc, trie, ew] = ['least-connections', 'prefix-trie', 'estimated-wait'].map((p) =>
          runCell(s, p),
        );
        rows.push(
          `${file} ×${k}: least-connections ${lc!.meanE2eS.toFixed(2)}, prefix-trie ${trie!.meanE2eS.toFixed(2)}, default ${ew!.meanE2eS.toFixed(2)} s`,
        );
        assert.equal(ew!.completed, ew!.sent);
        const vsTrie = ew!.meanE2eS / trie!.meanE2eS;
        if (vsTrie > (k === 1 ? 1.15 : 1.6)) fails.push(`${file} ×${k}: ${vsTrie.toFixed(2)}× prefix-trie`);
        if (k === 2 && ew!.meanE2eS > 0.5 * lc!.meanE2eS)
          fails.push(`${file} ×2: not clear of least-connections`);
      }
    assert.deepEqual(fails, [], rows.join('\n'));
  });

  it('enumerates the registry: every built-in that runs without parameters', () => {
    const names = matrixPolicies();
    for (const p of ['round-robin', 'least-connections', 'estimated-wait', 'ollama-router', 'prefix-trie'])
      assert.ok(names.includes(p), p);
    assert.ok(!names.includes('pinned')); // needs a backend
    assert.ok(names.every((n) => policyNames().includes(n)));
  });

  it('judges against the better baseline and names losers to round robin', () => {
    const cell = (
      scenario: string,
      policy: string,
      e2e: number,
      ttft: number,
      completed = 10,
    ): MatrixCell => ({
      scenario,
      policy,
      sent: 10,
      completed,
      meanE2eS: e2e,
      ttftP90S: ttft,
    });
    const judged = judge([
      cell('s', 'round-robin', 10, 1),
      cell('s', 'least-connections', 8, 2),
      cell('s', 'x', 10.1, 1),
      cell('s', 'y', 12, 0.5, 9),
    ]);
    const x = judged.find((j) => j.policy === 'x')!;
    assert.ok(Math.abs(x.e2eVsBest - 10.1 / 8) < 1e-12);
    assert.equal(x.ttftVsBest, 1);
    assert.deepEqual(
      losers(judged).map((l) => l.policy),
      ['y'],
    );
    const t = matrixTable(judged);
    assert.match(t, /y +\+50\.0% \(1 unfinished\) +-50\.0%/);
    assert.throws(() => judge([cell('t', 'x', 1, 1)]), /no round-robin/);
  });
});
