import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PrefixCache } from './prefix-cache.js';

test('LRU: a touched block survives, the least recently used goes, chains lose their tails first', () => {
  const c = new PrefixCache(3);
  c.insert(['a1', 'a2']); // a1 most recent (walked last-to-first)
  c.insert(['b1']);
  assert.equal(c.size, 3);
  c.insert(['a1']); // touch a1: order now a2, b1, a1
  c.insert(['c1']); // evicts a2 (the chain's tail), not a1
  assert.equal(c.match(['a1', 'a2']), 1);
  assert.equal(c.match(['b1']), 1);
  assert.equal(c.match(['c1']), 1);
  c.insert(['d1']); // evicts b1
  assert.equal(c.match(['b1']), 0);
  assert.equal(c.size, 3);
});

test('heavy churn keeps the bound and the newest blocks', () => {
  const c = new PrefixCache(8192);
  for (let i = 0; i < 200_000; i++) c.insert([`k${i}`]);
  assert.equal(c.size, 8192);
  assert.equal(c.match([`k${199_999}`]), 1);
  assert.equal(c.match(['k0']), 0);
});

test('capacity 0 caches nothing', () => {
  const c = new PrefixCache(0);
  c.insert(['x']);
  assert.equal(c.match(['x']), 0);
  assert.equal(c.size, 0);
});
