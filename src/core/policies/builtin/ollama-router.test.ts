import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { collapsedLength, ollamaRouter } from './ollama-router.js';
import { backendView, requestInfo, chosen } from '../../testing.js';

const view = (name: string, index: number) => backendView(name, index);
const req = (id: string, promptText: string) => requestInfo(id, promptText);

test('whitespace runs count as one character', () => {
  assert.equal(collapsedLength('a  b\n\n\tc'), 5);
  assert.equal(collapsedLength(''), 0);
  assert.equal(
    collapsedLength(' \u000b\f\r x\u00a0\u00a0\u0008\u000e '),
    7,
    'only space and \\t-\\r are whitespace',
  );
  // Against a run-by-run count: every run of [ \t\n\v\f\r] is one character.
  fc.assert(
    fc.property(
      fc.string({
        unit: fc.constantFrom(' ', '\t', '\n', '\u000b', '\f', '\r', 'a', '\u00a0', '\u0008', 'é'),
        maxLength: 60,
      }),
      (t) => {
        assert.equal(collapsedLength(t), t.replace(/[ \t\n\v\f\r]+/g, ' ').length);
      },
    ),
  );
});

test('Algorithm 1: untimed idle backends first, then the smallest estimated wait; EMA updates per §4.3', () => {
  const p = ollamaRouter({ random: () => 0, params: { alpha: 0.5, initialF: 0.25 } });
  const a = view('a', 0);
  const b = view('b', 1);
  // Nothing timed: all candidates, W = 0 everywhere, tie → smaller queue → a.
  const r1 = req('1', 'x'.repeat(400));
  assert.equal(chosen(p.pick(r1, [a, b], 0))?.name, 'a');
  p.onDispatch?.(r1, a, 0);
  // a now has a queue and no estimate; b is idle and untimed → b.
  const r2 = req('2', 'x'.repeat(400));
  assert.equal(chosen(p.pick(r2, [a, b], 0))?.name, 'b');
  p.onDispatch?.(r2, b, 0);
  // a answers: T = 100 + 100 = 200 tokens in 20 s → t̂_a = 0.1 s/token; f ← 0.5·200/400 + 0.5·0.25 = 0.375.
  p.onComplete?.(
    r1,
    a,
    { ok: true, dispatchedAt: 0, finishedAt: 20_000, promptTokens: 100, completionTokens: 100 },
    20_000,
  );
  const d = p.describe!('a');
  assert.equal(d.timePerTokenS, 0.1);
  assert.equal(d.tokenFactor, 0.375);
  assert.equal(d.queueWeight, 1); // Ŵ was 0 at dispatch → γ = 1
  assert.equal(d.queueChars, 0);
  // Now a is timed and b (untimed) has a queue → b is not a candidate.
  assert.equal(chosen(p.pick(req('3', 'y'), [a, b], 20_000))?.name, 'a');
});

test('an empty prompt, zero tokens and failures leave estimates finite', () => {
  const p = ollamaRouter({ random: () => 0, params: {} });
  const a = view('a', 0);
  const r = req('1', '');
  p.onDispatch?.(r, a, 0);
  p.onComplete?.(
    r,
    a,
    { ok: true, dispatchedAt: 0, finishedAt: 1000, promptTokens: 5, completionTokens: 5 },
    1000,
  );
  assert.equal(p.describe!('a').tokenFactor, 0.25);
  const r2 = req('2', 'abc');
  p.onDispatch?.(r2, a, 0);
  p.onComplete?.(
    r2,
    a,
    { ok: true, dispatchedAt: 0, finishedAt: 1000, promptTokens: 0, completionTokens: 0 },
    1000,
  );
  const r3 = req('3', 'abc');
  p.onDispatch?.(r3, a, 0);
  p.onComplete?.(r3, a, { ok: false, dispatchedAt: 0, finishedAt: 1000 }, 1000);
  for (const v of Object.values(p.describe!('a'))) assert.ok(Number.isFinite(v));
});

test('bad parameters are refused at construction', () => {
  assert.throws(() => ollamaRouter({ random: () => 0, params: { alpha: 2 } }), /ollama-router.*alpha/);
  assert.throws(() => ollamaRouter({ random: () => 0, params: { nope: 1 } }), /ollama-router/);
});

test('the queue counts the dispatched prompt, whichever prompt was picked last', () => {
  const p = ollamaRouter({ random: () => 0, params: {} });
  const a = view('a', 0);
  p.pick(req('1', 'x'.repeat(400)), [a], 0);
  p.onDispatch!(req('2', 'y  y'), a, 0);
  assert.equal(p.describe!('a').queueChars, 3);
  p.onDispatch!(req('1', 'x'.repeat(400)), a, 0);
  assert.equal(p.describe!('a').queueChars, 403);
});
