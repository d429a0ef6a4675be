import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { RequestInfo } from '../../types.js';
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
  c.record('r1', 'a', doc);
  const r = req('r2', doc + 'question');
  assert.equal(c.keysOf(r), undefined);
  assert.equal(c.cachedOf(r, c.keysOf(r), 'a', 1000), 0);
  assert.equal(c.creditedPrefill(1000, 0), 1000);
  assert.equal(c.chunksOf('a'), undefined);
});

test('cached prefix: the backend sent a prompt is credited its shared prefix, in tokens', () => {
  const c = new CachedPrefix(1, 4096);
  c.record('r1', 'a', doc);
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
