import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { estimatedWait } from '../core/policies/builtin/estimated-wait/policy.js';
import { backendView, engineReport, requestInfo } from '../core/testing.js';
import { traced } from './decision-trace.js';

test('decision trace: off without a file; with one, a line per dispatching pick and per completion', () => {
  const p = estimatedWait({ random: () => 0, params: {} });
  assert.equal(traced(p, undefined), p);
  const original = p.pick;
  assert.equal(traced(p, '').pick, original);

  const dir = mkdtempSync(join(tmpdir(), 'llmlb-trace-'));
  try {
    const file = join(dir, 'trace.jsonl');
    const t = traced(estimatedWait({ random: () => 0, params: {} }), file);
    const a = backendView('a', 0, { api: 'openai' });
    const b = backendView('b', 1, { api: 'openai' });
    const r = requestInfo('r1', 'Document 0: some text', { api: 'openai' });
    const to = t.pick(r, [a, b], 0);
    assert.ok(typeof to === 'object' && 'name' in to);
    t.onDispatch?.(r, to, 0);
    t.onComplete?.(r, to, engineReport(0, 100, 90, 5, 10), 200);
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(lines.length, 2);
    const [pick, done] = lines as [Record<string, unknown>, Record<string, unknown>];
    assert.equal(pick.ev, 'pick');
    assert.equal(pick.to, to.name);
    const explain = pick.explain as { scores: number[]; detail: { cachedTokens: number[] } };
    assert.equal(explain.scores.length, 2);
    assert.equal(explain.detail.cachedTokens.length, 2);
    assert.equal(done.ev, 'done');
    assert.equal(done.cachedTokens, 10);
    assert.equal(done.promptTokens, 100);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
