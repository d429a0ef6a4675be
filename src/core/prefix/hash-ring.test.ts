import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { HashRing, hash32 } from './hash-ring.js';

const ring = (n: number, vnodes = 100): HashRing => {
  const r = new HashRing(vnodes);
  for (let i = 0; i < n; i++) r.add(`b${i}`);
  return r;
};
const keys = Array.from({ length: 20_000 }, (_, i) => `user-${i}`);
const assign = (r: HashRing): string[] => keys.map((k) => r.lookup(k)!);

test('keys spread evenly over members (virtual nodes)', () => {
  const r = ring(20);
  const counts = new Map<string, number>();
  for (const b of assign(r)) counts.set(b, (counts.get(b) ?? 0) + 1);
  assert.equal(counts.size, 20);
  const mean = keys.length / 20;
  const max = Math.max(...counts.values());
  const min = Math.min(...counts.values());
  // With 100 points per member the heaviest share stays well under 1.5× the mean.
  assert.ok(max < 1.5 * mean && min > 0.5 * mean, `min ${min} max ${max} mean ${mean}`);
});

test('adding a member moves only the keys it takes, about 1/(n+1) of them', () => {
  const r = ring(10);
  const before = assign(r);
  r.add('b10');
  const after = assign(r);
  let moved = 0;
  for (let i = 0; i < keys.length; i++) {
    if (before[i] !== after[i]) {
      moved++;
      assert.equal(after[i], 'b10', 'a key moved between two old members');
    }
  }
  const share = moved / keys.length;
  assert.ok(share > 0.05 && share < 0.15, `moved ${share}`);
});

test('removing a member moves only its own keys', () => {
  const r = ring(10);
  const before = assign(r);
  r.remove('b3');
  const after = assign(r);
  for (let i = 0; i < keys.length; i++) {
    if (before[i] === 'b3') assert.notEqual(after[i], 'b3');
    else assert.equal(after[i], before[i]);
  }
  assert.ok(!r.has('b3'));
  assert.equal(r.size, 9);
});

test('unavailable members are skipped by walking the ring, and keys return when they are back', () => {
  const r = ring(8);
  const before = assign(r);
  const down = new Set(['b2', 'b5']);
  const during = keys.map((k) => r.lookup(k, (n) => !down.has(n))!);
  for (let i = 0; i < keys.length; i++) {
    assert.ok(!down.has(during[i]!));
    if (!down.has(before[i]!)) assert.equal(during[i], before[i]);
  }
  // Skipping equals removing them from the ring (the next point clockwise).
  const without = ring(8);
  without.remove('b2');
  without.remove('b5');
  assert.deepEqual(during, assign(without));
  assert.deepEqual(assign(r), before);
  assert.equal(
    r.lookup('x', () => false),
    undefined,
  );
  assert.equal(new HashRing(4).lookup('x'), undefined);
});

test('weights scale a member’s share; the ring does not depend on insertion order', () => {
  const r = new HashRing(100);
  r.add('big', 3);
  r.add('small', 1);
  const big = assign(r).filter((b) => b === 'big').length / keys.length;
  assert.ok(big > 0.65 && big < 0.85, `big ${big}`);
  const a = new HashRing(50);
  const b = new HashRing(50);
  ['x', 'y', 'z'].forEach((n) => a.add(n));
  ['z', 'x', 'y'].forEach((n) => b.add(n));
  assert.deepEqual(
    keys.slice(0, 500).map((k) => a.lookup(k)),
    keys.slice(0, 500).map((k) => b.lookup(k)),
  );
  assert.throws(() => r.add('bad', 0), /weight/);
  assert.throws(() => new HashRing(0), /vnodes/);
});

test('property: lookup with an availability predicate equals lookup on the ring of available members', () => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.nat(30), { minLength: 1, maxLength: 12 }),
      fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
      fc.array(fc.string({ maxLength: 8 }), { maxLength: 30 }),
      (members, up, ks) => {
        const full = new HashRing(16);
        const avail = new HashRing(16);
        members.forEach((m, i) => {
          full.add(`m${m}`);
          if (up[i]) avail.add(`m${m}`);
        });
        const ok = new Set(members.filter((_, i) => up[i]).map((m) => `m${m}`));
        for (const k of ks)
          assert.equal(
            full.lookup(k, (n) => ok.has(n)),
            avail.lookup(k),
          );
      },
    ),
  );
});

test('hash32 is a 32-bit unsigned hash that separates close strings', () => {
  const hs = new Set(keys.map(hash32));
  assert.ok(hs.size > keys.length - 5);
  for (const h of hs) assert.ok(Number.isInteger(h) && h >= 0 && h < 2 ** 32);
});
