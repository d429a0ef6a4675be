import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KeyTable } from './key-table.js';
import { createRng } from '../rng.js';

test('key table: answers as a Set of the same keys would, through growth and clears', () => {
  const rnd = createRng(5);
  const t = new KeyTable(4);
  const s = new Set<number>();
  for (let round = 0; round < 3; round++) {
    // Keys from a small range (many repeats), 0 and the largest 30-bit key included.
    for (let i = 0; i < 5000; i++) {
      const k = i === 0 ? 0 : i === 1 ? 0x3fffffff : Math.floor(rnd() * 20_000);
      assert.equal(t.add(k), !s.has(k), `add ${k}`);
      s.add(k);
      assert.equal(t.size, s.size);
    }
    for (let k = 0; k < 20_000; k++) assert.equal(t.has(k), s.has(k), `has ${k}`);
    assert.equal(t.has(0x3fffffff), true);
    assert.ok(t.capacity >= 2 * t.size, 'at most half full');
    t.clear(round === 1 ? 8 : 5000);
    s.clear();
    assert.equal(t.size, 0);
    assert.equal(t.has(0), false);
  }
  // A clear for far fewer keys than it holds room for gives the memory back.
  t.add(1);
  const big = t.capacity;
  for (let k = 0; k < 50_000; k++) t.add(k);
  assert.ok(t.capacity > big);
  t.clear(100);
  assert.equal(t.capacity, 256);
});
