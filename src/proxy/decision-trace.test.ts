import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { estimatedWait } from '../core/policies/builtin/estimated-wait/policy.js';
import { backendView, engineReport, requestInfo } from '../core/testing.js';
import { HOLD, type Policy } from '../core/types.js';
import { traced, traceSink } from './decision-trace.js';

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

test('decision trace, every event (LLMLB_PICK_DEBUG=DIR): holds with the backend waited for, pushes, per-process file', () => {
  assert.equal(traceSink({}), undefined);
  assert.deepEqual(traceSink({ LLMLB_DECISION_TRACE: '/x/t.jsonl' }), { file: '/x/t.jsonl', every: false });
  assert.deepEqual(traceSink({ LLMLB_PICK_DEBUG: '/x' }), {
    file: join('/x', `${process.pid}.jsonl`),
    every: true,
  });
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-trace-'));
  try {
    const file = join(dir, 'every.jsonl');
    const a = backendView('a', 0, { api: 'openai' });
    let hold = true;
    const inner: Policy = { name: 'test', pick: (_r, cs) => (hold ? HOLD.retry : cs[0]!) };
    const t = traced(
      inner,
      { file, every: true },
      {
        othersOf: () => 2,
        allowance: () => 1,
        waitingFor: (id) => (id === 'r1' ? 'a' : undefined),
      },
    );
    const r = requestInfo('r1', 'Document 0', { api: 'openai' });
    assert.equal(t.pick(r, [a], 0), HOLD.retry);
    hold = false;
    const to = t.pick(r, [a], 5);
    assert.ok(typeof to === 'object' && 'name' in to);
    t.onDispatch?.(r, to, 5);
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(
      lines.map((l) => [l.ev, l.to ?? l.backend]),
      [
        ['pick', 'hold:retry'],
        ['pick', 'a'],
        ['push', 'a'],
      ],
    );
    assert.equal(lines[0]!.waitingFor, 'a');
    assert.deepEqual((lines[1]!.candidates as Record<string, unknown>[])[0], {
      name: 'a',
      inFlight: 0,
      others: 2,
      allowance: 1,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
