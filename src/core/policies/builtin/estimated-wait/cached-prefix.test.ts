import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { RequestInfo } from '../../../types.js';
import { CachedPrefix } from './cached-prefix.js';

const req = (id: string, promptText: string): RequestInfo => ({
  id,
  model: 'm',
  api: 'ollama',
  arrivedAt: 0,
  promptText,
});
const doc = Array.from({ length: 200 }, (_, i) => `line ${i} of a shared document\n`).join('');

test('cached prefix: off (share 0) — nothing recorded, every backend prefills the whole prompt', () => {
  const c = new CachedPrefix(0, 64);
  c.record('r1', 'a', doc, 0.25);
  const r = req('r2', doc + 'question');
  assert.equal(c.keysOf(r), undefined);
  assert.equal(c.cachedOf(r, c.keysOf(r), 'a', 1000), 0);
  assert.equal(c.creditedPrefill(1000, 0), 1000);
  assert.equal(c.chunksOf('a'), undefined);
});

test('cached prefix: the backend sent a prompt is credited its shared prefix, in tokens', () => {
  const c = new CachedPrefix(1, 4096);
  c.record('r1', 'a', doc, 0.25);
  const r = req('r2', doc + 'x'.repeat(doc.length)); // half of it shared with r1
  const keys = c.keysOf(r);
  const onA = c.cachedOf(r, keys, 'a', 1000);
  assert.ok(onA > 400 && onA <= 500, `about half the prompt's 1000 tokens: ${onA}`);
  assert.equal(c.cachedOf(r, keys, 'b', 1000), 0);
  assert.equal(c.creditedPrefill(1000, onA), 1000 - onA);
  assert.ok(c.chunksOf('a')! > 0);
  c.removeBackend('a');
  assert.equal(c.cachedOf(r, c.keysOf(r), 'a', 1000), 0);
});

test('cached prefix: a partial share credits part of the cached prefix; at least one token is prefilled', () => {
  const half = new CachedPrefix(0.5, 64);
  assert.equal(half.creditedPrefill(1000, 600), 700);
  assert.equal(new CachedPrefix(1, 64).creditedPrefill(100, 100), 1);
});

test('cached prefix: the engine cache is learned in tokens from what engines report cached', () => {
  const c = new CachedPrefix(1, 100_000);
  assert.equal(c.cacheTokensOf('a'), 100_000);
  // Predicted 1,000 cached, found 900 / 600: as predicted (within half), no change.
  c.learn('a', 1000, 900, 2000, 0.25);
  c.learn('a', 1000, 600, 2000, 0.25);
  assert.equal(c.cacheTokensOf('a'), 100_000);
  // Predicted 1,000, found 100: evicted sooner than assumed — 3 % less.
  c.learn('a', 1000, 100, 2000, 0.25);
  assert.equal(c.cacheTokensOf('a'), 97_000);
  // Found 1,500 where 1,000 was predicted: the engine keeps more than remembered — a quarter more.
  c.learn('a', 1000, 1500, 2000, 0.25);
  assert.equal(c.cacheTokensOf('a'), 121_250);
  // Per backend; bad reports change nothing; removal forgets.
  assert.equal(c.cacheTokensOf('b'), 100_000);
  c.learn('a', 1000, Number.NaN, 2000, 0.25);
  c.learn('a', 1000, -5, 2000, 0.25);
  assert.equal(c.cacheTokensOf('a'), 121_250);
  for (let i = 0; i < 2000; i++) c.learn('a', 1000, 0, 2000, 0.25);
  // Never below two chunks (32 tokens at 4 characters a token), never NaN.
  assert.equal(c.cacheTokensOf('a'), 32);
  c.removeBackend('a');
  assert.equal(c.cacheTokensOf('a'), 100_000);
});

test('cached prefix: the record holds as many chunks as the learned cache, at the learned token ratio', () => {
  const c = new CachedPrefix(1, 64 * 16 * 0.25); // 256 tokens: 16 chunks of 64 characters at 0.25 tokens a character
  const long = Array.from({ length: 100 }, (_, i) => `block ${i} of a long shared text...\n`).join('');
  c.record('r1', 'a', long, 0.25);
  c.record('r2', 'a', long + 'more', 0.25);
  assert.ok(c.chunksOf('a')! <= 16, `${c.chunksOf('a')} chunks`);
  // The same cache in tokens holds 8× the chunks when a character is 8× fewer tokens (a trace's stand-in text).
  const d = new CachedPrefix(1, 64 * 16 * 0.25);
  d.record('r1', 'a', long, 0.25 / 8);
  d.record('r2', 'a', long + 'more', 0.25 / 8);
  assert.ok(d.chunksOf('a')! > 16, `${d.chunksOf('a')} chunks`);
});

test('cached prefix: a cache that misses most predictions is learned down fast, an occasional miss slowly', () => {
  const mostly = new CachedPrefix(1, 1_000_000);
  for (let i = 0; i < 20; i++) mostly.learn('a', 1000, 0, 2000, 0.25);
  assert.ok(mostly.cacheTokensOf('a') < 100_000, `${mostly.cacheTokensOf('a')} after 20 misses in a row`);
  const rarely = new CachedPrefix(1, 1_000_000);
  for (let i = 0; i < 200; i++) rarely.learn('a', 1000, i % 10 === 0 ? 0 : 1000, 2000, 0.25);
  // 20 misses among 200 answers: 3 % each.
  assert.ok(Math.abs(rarely.cacheTokensOf('a') - 1_000_000 * 0.97 ** 20) < 1, `${rarely.cacheTokensOf('a')}`);
});

test("cached prefix: without cached tokens in answers, the engine's prefix-cache counters teach it over a window", () => {
  const c = new CachedPrefix(1, 100_000);
  // The first answer opens the window at the counters' reading.
  c.learnFromCounters('a', 10_000, 5_000, 1000, 2000, 0.25);
  assert.equal(c.cacheTokensOf('a'), 100_000);
  // Counters not moved: the answer joins the window.
  c.learnFromCounters('a', 10_000, 5_000, 1000, 2000, 0.25);
  assert.equal(c.cacheTokensOf('a'), 100_000);
  // 4,000 tokens queried since, none hit, while 1,000 + 1,000 of 4,000 answered were predicted cached: gone.
  c.learnFromCounters('a', 14_000, 5_000, 1000, 2000, 0.25);
  assert.ok(c.cacheTokensOf('a') < 100_000);
  const after = c.cacheTokensOf('a');
  // Hits as predicted (half the queried tokens, half the answered ones predicted): no change.
  c.learnFromCounters('a', 14_000, 5_000, 1000, 2000, 0.25);
  c.learnFromCounters('a', 18_000, 7_000, 1000, 2000, 0.25);
  assert.equal(c.cacheTokensOf('a'), after);
  // A restarted engine (counters back to 0) opens a new window; bad values change nothing.
  c.learnFromCounters('a', 100, 0, 1000, 2000, 0.25);
  c.learnFromCounters('a', Number.NaN, 0, 1000, 2000, 0.25);
  c.learnFromCounters('a', 200, 0, 1000, 0, 0.25);
  assert.equal(c.cacheTokensOf('a'), after);
});

test('cached prefix: the size an engine reports caps the learned one, from the start and when it grows', () => {
  const c = new CachedPrefix(1, 1 << 20);
  assert.equal(c.cacheTokensOf('a'), 1 << 20);
  c.capTo('a', 5000);
  assert.equal(c.cacheTokensOf('a'), 5000, 'starts at what the engine says');
  assert.equal(c.cacheTokensOf('b'), 1 << 20, 'per backend');
  // More found than predicted would grow it by a quarter: not past the engine's size.
  c.learn('a', 0, 4000, 4000, 0.25);
  assert.equal(c.cacheTokensOf('a'), 5000);
  // A miss shrinks it below.
  c.learn('a', 4000, 0, 4000, 0.25);
  assert.ok(c.cacheTokensOf('a') < 5000);
  c.removeBackend('a');
  assert.equal(c.cacheTokensOf('a'), 1 << 20);
});
