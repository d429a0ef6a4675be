import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StallWatch, UNCAPPED_ANSWER_TOKENS, type WatchedAttempt } from './stall-watch.js';

interface Fake extends WatchedAttempt {
  firstByteAt: number | undefined;
  chunks: number;
  abandoned: string | undefined;
}

function attempt(dispatchedAt: number): Fake {
  const a: Fake = {
    dispatchedAt,
    firstByteAt: undefined,
    chunks: 0,
    abandoned: undefined,
    abandon(reason: string) {
      a.abandoned = reason;
    },
  };
  return a;
}

const opts = { minMs: 1000, factor: 10, fallbackMs: 600_000 };

/** A streamed answer on `b`: first byte after `ttfb` ms, `tokens` tokens by `end` ms. */
function streamed(w: StallWatch, b: string, t0: number, ttfb: number, end: number, tokens: number): void {
  const a = attempt(t0);
  w.track(b, a, t0, { streamed: true });
  a.firstByteAt = t0 + ttfb;
  a.chunks = tokens;
  w.untrack(b, a, t0 + end, true, tokens);
}

test('a hung backend (no byte anywhere) is stuck after its limit, streamed or not', () => {
  const w = new StallWatch(opts);
  streamed(w, 'a', 0, 50, 1050, 100); // 10 ms/token, ttfb 50 ms → limit max(1000, 500)
  const s = attempt(2000);
  w.track('a', s, 2000, { streamed: true });
  assert.deepEqual(w.check(2999), []);
  const stuck = w.check(3000);
  assert.equal(stuck.length, 1);
  assert.deepEqual(stuck[0]!.attempts, [s]);

  // Only a non-streamed request there: found once past the limit plus 3× its expected duration.
  const w2 = new StallWatch(opts);
  streamed(w2, 'a', 0, 50, 1050, 100);
  const n = attempt(2000);
  w2.track('a', n, 2000, { streamed: false, maxTokens: 100 });
  assert.deepEqual(w2.check(2000 + 1000 + 3 * 10.5 * 100 - 1), []);
  assert.equal(w2.check(2000 + 1000 + 3 * 10.5 * 100).length, 1);
});

test('a slow non-streamed answer is not stuck while it is within its expected duration', () => {
  const w = new StallWatch(opts);
  // Three short streamed warm-ups at ~180 ms/token: the usual first byte is 200 ms, limit 2 s.
  for (let i = 0; i < 3; i++) streamed(w, 'slow', i * 10_000, 200, 2000, 10);
  assert.equal(w.limitMs('slow'), 2000);
  // A 400-token essay, not streamed: its first byte comes after ~72 s. Before, this was "stuck" at 2 s.
  const a = attempt(100_000);
  w.track('slow', a, 100_000, { streamed: false, maxTokens: 400 });
  for (let t = 100_000; t <= 172_000; t += 1000) assert.deepEqual(w.check(t), [], `stuck at ${t}`);
  a.firstByteAt = 172_000;
  a.chunks = 1;
  w.untrack('slow', a, 172_000, true, 400);
  // Its whole answer is no time-to-first-token sample: the limit stays what the streams set.
  assert.equal(w.limitMs('slow'), 2000);
});

test('an uncapped non-streamed answer is given the default answer length', () => {
  const w = new StallWatch({ ...opts, fallbackMs: 1e9 });
  streamed(w, 'a', 0, 10, 1010, 100); // ~10 ms per token
  const a = attempt(5000);
  w.track('a', a, 5000, { streamed: false });
  const own = 1000 + 3 * 10.1 * UNCAPPED_ANSWER_TOKENS;
  assert.deepEqual(w.check(5000 + own - 1), []);
  assert.equal(w.check(5000 + own).length, 1);
});

test('a non-streamed answer longer than the first-byte timeout allows is left to that timeout', () => {
  const w = new StallWatch({ ...opts, fallbackMs: 60_000 });
  streamed(w, 'a', 0, 10, 1010, 100);
  assert.equal(w.wholeAnswerMs('a', { streamed: false, maxTokens: 10_000 }), undefined);
  const a = attempt(2000);
  w.track('a', a, 2000, { streamed: false, maxTokens: 10_000 });
  assert.deepEqual(w.check(59_000), []);
});

test('bytes on another request of the backend mean it is not stuck', () => {
  const w = new StallWatch(opts);
  streamed(w, 'a', 0, 50, 1050, 100);
  const waiting = attempt(2000);
  w.track('a', waiting, 2000, { streamed: true });
  const other = attempt(2000);
  w.track('a', other, 2000, { streamed: true });
  other.firstByteAt = 2100;
  for (let t = 2100; t < 10_000; t += 500) {
    other.chunks++;
    assert.deepEqual(w.check(t), [], `stuck at ${t}`);
  }
});

test('a fleet that only ever answered whole still finds a hung backend (limit: the floor)', () => {
  const w = new StallWatch(opts);
  assert.equal(w.limitMs('a'), undefined, 'no history: left to the first-byte timeout');
  const ok = attempt(0);
  w.track('good', ok, 0, { streamed: false, maxTokens: 50 });
  ok.firstByteAt = 500;
  ok.chunks = 1;
  w.untrack('good', ok, 500, true, 50); // 10 ms per token
  assert.equal(w.limitMs('hung'), 1000);
  const h = attempt(1000);
  w.track('hung', h, 1000, { streamed: false, maxTokens: 50 });
  assert.deepEqual(w.check(1000 + 1000 + 1500 - 1), []);
  assert.equal(w.check(1000 + 1000 + 1500).length, 1);
});

test('no NaN from odd samples: zero tokens and zero time teach nothing wrong', () => {
  const w = new StallWatch(opts);
  const a = attempt(0);
  w.track('a', a, 0, { streamed: false });
  a.firstByteAt = 0;
  w.untrack('a', a, 0, true, 0);
  assert.equal(w.wholeAnswerMs('a', { streamed: false }), undefined);
  const b = attempt(0);
  w.track('a', b, 0, { streamed: false, maxTokens: 10 });
  b.firstByteAt = 0;
  w.untrack('a', b, 0, true, 10); // 0 ms per token
  assert.equal(w.wholeAnswerMs('a', { streamed: false, maxTokens: 10 }), 0);
});
