import { test } from 'node:test';
import assert from 'node:assert/strict';
import { estimatedWait } from './estimated-wait.js';
import type { BackendView, Policy, RequestInfo } from '../types.js';
import { backendView } from '../testing.js';

const view = (name: string, index: number, inFlight = 0): BackendView =>
  backendView(name, index, { inFlight });
const req = (id: string, chars = 400, maxTokens?: number): RequestInfo => ({
  id,
  model: 'm',
  api: 'ollama',
  arrivedAt: 0,
  promptText: 'x'.repeat(chars),
  maxTokens,
});

/** Teach the policy a backend's engine rates with one answered request. */
function teach(
  p: Policy,
  b: BackendView,
  id: string,
  prefillMsPerTok: number,
  decodeMsPerTok: number,
  now: number,
): void {
  const r = req(id);
  p.onDispatch?.(r, b, now);
  const promptEvalMs = 100 * prefillMsPerTok;
  const evalMs = 100 * decodeMsPerTok;
  p.onComplete?.(
    r,
    b,
    {
      ok: true,
      dispatchedAt: now,
      finishedAt: now + promptEvalMs + evalMs,
      promptTokens: 100,
      completionTokens: 100,
      promptEvalMs,
      evalMs,
    },
    now + promptEvalMs + evalMs,
  );
}

test('learns engine rates and prefers the faster backend', () => {
  const p = estimatedWait({ random: () => 0, params: {} });
  const fast = view('fast', 0);
  const slow = view('slow', 1);
  teach(p, fast, 't1', 1, 10, 0);
  teach(p, slow, 't2', 10, 100, 0);
  assert.equal(p.describe!('fast').decodeSPerToken, 0.01);
  assert.equal(p.pick(req('r'), [fast, slow], 5000)?.name, 'fast');
});

test('a busy fast backend loses to an idle slow one once its queue outweighs the speed gap', () => {
  const p = estimatedWait({ random: () => 0, params: { defaultSlots: 1 } });
  const fast = view('fast', 0);
  const slow = view('slow', 1);
  teach(p, fast, 't1', 1, 10, 0);
  teach(p, slow, 't2', 2, 20, 0);
  // Load the fast one with 3 long requests in flight (each ~1.1 s of work there).
  for (let i = 0; i < 3; i++) {
    const r = req(`f${i}`);
    p.onDispatch?.(r, view('fast', 0, i), 10_000);
  }
  assert.equal(p.pick(req('n'), [view('fast', 0, 3), slow], 10_000)?.name, 'slow');
});

test('backends that run several sequences at once are not charged a queue below their slots', () => {
  const p = estimatedWait({ random: () => 0, params: { defaultSlots: 4 } });
  const a = view('a', 0);
  const b = view('b', 1);
  teach(p, a, 't1', 1, 10, 0);
  teach(p, b, 't2', 1, 12, 0);
  for (let i = 0; i < 3; i++) p.onDispatch?.(req(`a${i}`), view('a', 0, i), 1000);
  // a has 3 in flight but 4 slots: the new request starts at once there, and a is faster.
  assert.equal(p.pick(req('n'), [view('a', 0, 3), b], 1000)?.name, 'a');
});

test('no winner-takes-all: an unmeasured or stale idle backend is tried', () => {
  const p = estimatedWait({ random: () => 0, params: { exploreAfterDecisions: 2 } });
  const a = view('a', 0);
  const b = view('b', 1);
  teach(p, a, 't1', 1, 10, 0);
  // b has never answered: costed with the best rates, it ties with a and wins on round-robin.
  assert.equal(p.pick(req('x'), [a, b], 10)?.name, 'b');
  teach(p, b, 't2', 5, 50, 100);
  assert.equal(p.pick(req('y'), [a, b], 200)?.name, 'a');
  assert.equal(p.pick(req('y2'), [a, b], 300)?.name, 'a');
  // two decisions later, b's estimate is stale and b is idle → it is re-measured
  assert.equal(p.pick(req('z'), [view('a', 0), b], 400)?.name, 'b');
});

test('predicted output length follows observed answers and the client cap', () => {
  const p = estimatedWait({ random: () => 0, params: { defaultOutputTokens: 10 } });
  const a = view('a', 0);
  for (let i = 0; i < 30; i++) teach(p, a, `t${i}`, 1, 10, i * 10_000);
  const d = p.describe!('a');
  assert.ok((d.slots ?? 0) >= 1);
  const r = req('capped', 400, 5);
  p.onDispatch?.(r, a, 400_000);
  // pending work for a capped request: at most 5 tokens of decode + prefill
  assert.ok(p.describe!('a').pendingWorkS! <= 0.1 * 1 + 5 * 0.01 + 1e-9);
});
