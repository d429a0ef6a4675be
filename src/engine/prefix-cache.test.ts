import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRng } from '../core/rng.js';
import { PrefixCache } from './prefix-cache.js';

// Block hashes are integers below 2^53; the tests use a mix of small and full-width ones.
const A1 = 11;
const A2 = 12;
const B1 = 2 ** 52 + 21;
const C1 = 2 ** 40 + 31;
const D1 = 41;

test('LRU: a touched block survives, the least recently used goes, chains lose their tails first', () => {
  const c = new PrefixCache(3);
  c.insert([A1, A2]); // A1 most recent (walked last-to-first)
  c.insert([B1]);
  assert.equal(c.size, 3);
  c.insert([A1]); // touch A1: order now A2, B1, A1
  c.insert([C1]); // evicts A2 (the chain's tail), not A1
  assert.equal(c.match([A1, A2]), 1);
  assert.equal(c.match([B1]), 1);
  assert.equal(c.match([C1]), 1);
  c.insert([D1]); // evicts B1
  assert.equal(c.match([B1]), 0);
  assert.equal(c.size, 3);
});

test('heavy churn keeps the bound and the newest blocks', () => {
  const c = new PrefixCache(8192);
  for (let i = 0; i < 200_000; i++) c.insert([i * 2 ** 21 + 7]);
  assert.equal(c.size, 8192);
  assert.equal(c.match([199_999 * 2 ** 21 + 7]), 1);
  assert.equal(c.match([7]), 0);
});

test('capacity 0 caches nothing', () => {
  const c = new PrefixCache(0);
  c.insert([1]);
  assert.equal(c.match([1]), 0);
  assert.equal(c.size, 0);
});

/** The reference: a Map in LRU order (delete + set moves a key to the back). */
class MapLru {
  readonly m = new Map<number, true>();
  constructor(readonly capacity: number) {}
  insert(hs: readonly number[]): void {
    if (this.capacity <= 0) return;
    for (let i = hs.length - 1; i >= 0; i--) {
      const h = hs[i]!;
      if (this.m.delete(h)) {
        this.m.set(h, true);
        continue;
      }
      if (this.m.size >= this.capacity) this.m.delete(this.m.keys().next().value!);
      this.m.set(h, true);
    }
  }
  evictTo(n: number): void {
    while (this.m.size > n) this.m.delete(this.m.keys().next().value!);
  }
  match(hs: readonly number[]): number {
    let n = 0;
    while (n < hs.length && this.m.has(hs[n]!)) n++;
    return n;
  }
}

test('agrees with a Map-based LRU under random inserts, deletes, evictions and lookups (table growth and probe-run deletion included)', () => {
  const rng = createRng(3);
  for (const capacity of [1, 5, 64, 3000]) {
    const c = new PrefixCache(capacity);
    const ref = new MapLru(capacity);
    // A small key space forces hits, touches and long probe runs; some keys collide in low bits.
    const key = (): number => {
      const k = Math.floor(rng() * capacity * 3);
      return rng() < 0.5 ? k : k * 4294967296 + (k & 7);
    };
    for (let step = 0; step < 20_000; step++) {
      const r = rng();
      if (r < 0.6) {
        const hs = Array.from({ length: 1 + Math.floor(rng() * 6) }, key);
        c.insert(hs);
        ref.insert(hs);
      } else if (r < 0.8) {
        const h = key();
        c.delete(h);
        ref.m.delete(h);
      } else if (r < 0.85) {
        const n = Math.floor(rng() * capacity);
        c.evictTo(n);
        ref.evictTo(n);
      } else {
        const hs = Array.from({ length: 1 + Math.floor(rng() * 4) }, key);
        assert.equal(c.match(hs), ref.match(hs));
      }
      assert.equal(c.size, ref.m.size);
    }
    for (const k of ref.m.keys()) assert.ok(c.has(k));
  }
});
