import { test } from 'node:test';
import assert from 'node:assert/strict';
import { countViolations } from './meter.js';

const L = { a: { weight: 1, maxConcurrent: 2, requestsPerMinute: 3, tokensPerMinute: 100 } };

test('counts requests, tokens and concurrency above target per one-minute window', () => {
  const calls = [
    { model: 'a', startMs: 0, endMs: 130_000, tokens: 40 },
    { model: 'a', startMs: 1_000, endMs: 2_000, tokens: 40 },
    { model: 'a', startMs: 1_500, endMs: 3_000, tokens: 40 }, // 3 in flight, 120 tokens
    { model: 'a', startMs: 2_500, endMs: 4_000, tokens: 10 }, // 4th request in window 0
    { model: 'a', startMs: 61_000, endMs: 62_000, tokens: 10 },
  ];
  const v = countViolations(calls, L);
  assert.equal(v.requests, 1);
  assert.equal(v.tokens, 1);
  assert.equal(v.concurrency, 1);
  assert.equal(v.total, 3);
  assert.equal(v.windows, 1);
  assert.equal(v.windowCount, 3);
  assert.equal(v.peakConcurrency.a, 3);
});

test('a call running across a window boundary counts in the next window; an end frees a slot before a start at the same instant', () => {
  const calls = [
    { model: 'a', startMs: 0, endMs: 70_000, tokens: 1 },
    { model: 'a', startMs: 10, endMs: 70_000, tokens: 1 },
    { model: 'a', startMs: 59_000, endMs: 65_000, tokens: 1 },
    { model: 'a', startMs: 65_000, endMs: 66_000, tokens: 1 },
  ];
  const v = countViolations(calls, L);
  assert.equal(v.concurrency, 2, 'window 0 (3 at 59 s) and window 1 (3 carried over)');
  const ok = countViolations(
    calls.slice(0, 2).concat([{ model: 'a', startMs: 70_000, endMs: 71_000, tokens: 1 }]),
    L,
  );
  assert.equal(ok.concurrency, 0);
});
