import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { PrefixTrie } from './prefix-trie.js';

const trie = (maxEntries = 1000, chunkChars = 4, maxPrefixChars = 1 << 20): PrefixTrie =>
  new PrefixTrie({ chunkChars, maxEntries, maxPrefixChars });

/** Match by backend names; returns [chars, sorted owner names]. */
function matchNames(t: PrefixTrie, text: string, available: readonly string[]): [number, string[]] {
  const ok = new Set(available);
  const m = t.match(t.keys(text), (id) => ok.has(t.nameOf(id)!));
  return [m.chars, m.owners.map((id) => t.nameOf(id)!).sort()];
}

test('longest prefix among available backends wins; a partial last chunk is not indexed', () => {
  const t = trie();
  t.insert(t.keys('aaaabbbbcccc'), 'A');
  t.insert(t.keys('aaaabbbbdddd'), 'B');
  t.insert(t.keys('aaaaxxxx'), 'C');
  assert.deepEqual(matchNames(t, 'aaaabbbbccccZZ', ['A', 'B', 'C']), [12, ['A']]);
  assert.deepEqual(matchNames(t, 'aaaabbbbeeee', ['A', 'B', 'C']), [8, ['A', 'B']]);
  // A is unavailable: B still matches two chunks.
  assert.deepEqual(matchNames(t, 'aaaabbbbcccc', ['B', 'C']), [8, ['B']]);
  // Only C available: the walk stops after the shared first chunk.
  assert.deepEqual(matchNames(t, 'aaaabbbbcccc', ['C']), [4, ['C']]);
  assert.deepEqual(matchNames(t, 'zzzz', ['A', 'B', 'C']), [0, []]);
  assert.deepEqual(matchNames(t, 'aaa', ['A']), [0, []]);
  assert.equal(t.size, 5);
  t.checkInvariants();
});

test('owners are kept once each, in the order they were first sent the prefix', () => {
  const t = trie();
  t.insert(t.keys('aaaabbbb'), 'A');
  t.insert(t.keys('aaaabbbb'), 'B');
  t.insert(t.keys('aaaa'), 'A');
  t.insert(t.keys('aaaabbbb'), 'B');
  const m = t.match(t.keys('aaaabbbb'), () => true);
  assert.deepEqual(
    m.owners.map((id) => t.nameOf(id)),
    ['A', 'B'],
  );
  t.checkInvariants();
});

test('only the first maxPrefixChars characters are indexed', () => {
  const t = trie(1000, 4, 8);
  assert.equal(t.keys('aaaabbbbcccc').length, 2);
  t.insert(t.keys('aaaabbbbcccc'), 'A');
  assert.equal(t.size, 2);
});

test('eviction drops the least recently inserted-through leaves first', () => {
  const t = trie(4);
  t.insert(t.keys('aaaabbbb'), 'A'); // nodes: aaaa, aaaa/bbbb
  t.insert(t.keys('ccccdddd'), 'B'); // 4 nodes
  t.insert(t.keys('aaaa'), 'C'); // touches aaaa only: aaaa/bbbb is now the oldest
  t.insert(t.keys('eeee'), 'A'); // 5 nodes > 4: evict the oldest leaf
  assert.equal(t.size, 4);
  t.checkInvariants();
  assert.deepEqual(matchNames(t, 'aaaabbbb', ['A', 'B', 'C']), [4, ['A', 'C']]);
  assert.deepEqual(matchNames(t, 'ccccdddd', ['A', 'B', 'C']), [8, ['B']]);
  t.insert(t.keys('ffffgggg'), 'A'); // two more: the cccc path (oldest) goes leaf first
  assert.equal(t.size, 4);
  assert.deepEqual(matchNames(t, 'ccccdddd', ['A', 'B', 'C']), [0, []]);
  assert.deepEqual(matchNames(t, 'aaaa', ['A', 'B', 'C']), [4, ['A', 'C']]);
  t.checkInvariants();
});

test('a path longer than the bound keeps its leading chunks', () => {
  const t = trie(3);
  t.insert(t.keys('aaaabbbbccccdddd'), 'A');
  assert.equal(t.size, 3);
  assert.deepEqual(matchNames(t, 'aaaabbbbccccdddd', ['A']), [12, ['A']]);
  t.checkInvariants();
});

test('an insert after a match with the same keys, but after an eviction in between, does not reuse dead nodes', () => {
  const t = trie(2);
  const k1 = t.keys('aaaabbbb');
  t.insert(k1, 'A');
  t.match(k1, () => true); // walk remembered: [aaaa, aaaa/bbbb]
  t.insert(t.keys('cccc'), 'B'); // evicts aaaa/bbbb
  t.insert(k1, 'C');
  t.checkInvariants();
  assert.deepEqual(matchNames(t, 'aaaabbbb', ['C']), [8, ['C']]);
});

test('an insert after a match that stopped at an unavailable owner still finds the deeper nodes', () => {
  const t = trie();
  const k = t.keys('aaaabbbbcccc');
  t.insert(k, 'A');
  t.insert(t.keys('aaaa'), 'B');
  const b = t.idOf('B')!;
  // Only B available: the walk stops at aaaa/bbbb (A's alone), though aaaa/bbbb/cccc exists.
  assert.equal(t.match(k, (id) => id === b).chars, 4);
  t.insert(k, 'B');
  t.checkInvariants();
  assert.equal(t.size, 3);
  assert.deepEqual(matchNames(t, 'aaaabbbbcccc', ['B']), [12, ['B']]);
  // A walk that ended at a missing node: the insert creates the rest after it.
  const k2 = t.keys('aaaabbbbdddd');
  assert.equal(t.match(k2, () => true).chars, 8);
  t.insert(k2, 'A');
  t.checkInvariants();
  assert.equal(t.size, 4);
  assert.deepEqual(matchNames(t, 'aaaabbbbdddd', ['A', 'B']), [12, ['A']]);
});

test('removing a backend forgets it everywhere and drops nodes nobody else holds', () => {
  const t = trie();
  t.insert(t.keys('aaaabbbbcccc'), 'A');
  t.insert(t.keys('aaaabbbb'), 'B');
  t.removeBackend('A');
  t.checkInvariants();
  assert.equal(t.size, 2);
  assert.equal(t.idOf('A'), undefined);
  assert.deepEqual(matchNames(t, 'aaaabbbbcccc', ['A', 'B']), [8, ['B']]);
  t.removeBackend('B');
  assert.equal(t.size, 0);
  t.removeBackend('nobody'); // no-op
  // Ids are reused without inheriting old ownership.
  t.insert(t.keys('zzzz'), 'D');
  assert.deepEqual(matchNames(t, 'aaaabbbb', ['D']), [0, []]);
  assert.deepEqual(matchNames(t, 'zzzz', ['D']), [4, ['D']]);
  t.checkInvariants();
});

test('keys: a prefix of a text has a prefix of its keys, for any chunk size and any UTF-16 text', () => {
  // Chunk sizes that are multiples of 4 hash all-ASCII texts on a fast path (UTF-8 bytes) and
  // others chunk by chunk: a text with a non-ASCII character late on must still share its leading
  // chunks' keys with an all-ASCII prefix of it.
  const unit = fc.constantFrom('a', 'b', 'é', '漢', '\u{1F600}', '\uD800', '\u0100', '\u0000');
  const ascii = fc.constantFrom('a', 'b', 'c');
  fc.assert(
    fc.property(
      fc.string({ unit: fc.oneof(ascii, unit), maxLength: 40 }),
      fc.string({ unit: fc.oneof(ascii, unit), maxLength: 40 }),
      fc.integer({ min: 1, max: 9 }),
      (a, b, size) => {
        const t = trie(1000, size);
        const whole = Array.from(t.keys(a + b));
        const head = Array.from(t.keys(a));
        assert.deepEqual(whole.slice(0, head.length), head);
        assert.equal(whole.length, Math.floor((a + b).length / size));
        // Texts that differ inside the indexed part get different keys from that chunk on.
        const c = a + b;
        if (c.length >= size) {
          const other = (c[0] === 'a' ? 'b' : 'a') + c.slice(1);
          assert.notEqual(Array.from(t.keys(other))[0], whole[0]);
        }
      },
    ),
    { numRuns: 500 },
  );
});

test('keys: characters that agree in their low byte or low bits still differ; into is reused', () => {
  const t = trie(1000, 4);
  const variants = ['aaaa', 'aaa\u0161', 'aaa\u00e1', 'aaa\u0000', 'aaa\u0100', 'aaa\u4e61'];
  const first = variants.map((v) => t.keys(v + 'zzzz')[0]);
  assert.equal(new Set(first).size, variants.length);
  // Keys after a differing chunk differ too (the chain carries the difference).
  const second = variants.map((v) => t.keys(v + 'zzzz')[1]);
  assert.equal(new Set(second).size, variants.length);
  const into = new Float64Array(8);
  const k = t.keys('aaaabbbbcccc', into);
  assert.equal(k.buffer, into.buffer);
  assert.deepEqual(Array.from(k), Array.from(t.keys('aaaabbbbcccc')));
  // Too short a buffer: a new array.
  assert.notEqual(t.keys('a'.repeat(40), into).buffer, into.buffer);
});

test('bad options are refused', () => {
  assert.throws(() => trie(0), /maxEntries/);
  assert.throws(() => trie(10, 1.5), /chunkChars/);
});

test('the bound holds over a long run (100k inserts into 1000 entries)', () => {
  const t = trie(1000, 8);
  let seed = 1;
  const rnd = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const words = Array.from({ length: 50 }, (_, i) => `w${String(i).padStart(6, '0')}`);
  for (let i = 0; i < 100_000; i++) {
    let s = '';
    const len = 1 + Math.floor(rnd() * 12);
    for (let k = 0; k < len; k++) s += words[Math.floor(rnd() * (k === 0 ? 5 : words.length))];
    t.insert(t.keys(s), `b${Math.floor(rnd() * 16)}`);
    if (t.size > 1000) assert.fail(`size ${t.size} after insert ${i}`);
    if (i % 25_000 === 0) t.removeBackend(`b${Math.floor(rnd() * 16)}`);
  }
  t.checkInvariants();
  assert.equal(t.size, 1000);
});

// Texts over a tiny alphabet with chunkChars 2 share prefixes often.
const text = fc.string({ unit: fc.constantFrom('a', 'b'), maxLength: 12 });
const op = fc.oneof(
  { weight: 6, arbitrary: fc.record({ k: fc.constant('insert' as const), text, b: fc.nat(4) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('remove' as const), b: fc.nat(4) }) },
  {
    weight: 3,
    arbitrary: fc.record({ k: fc.constant('match' as const), text, avail: fc.array(fc.nat(4)) }),
  },
);

test('property: without eviction, match equals the brute-force longest prefix among available backends', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
      const t = trie(1_000_000, 2);
      const sent: { keys: number[]; b: string }[] = [];
      for (const o of ops) {
        if (o.k === 'insert') {
          const keys = Array.from(t.keys(o.text));
          // Pick then dispatch with the same keys, as the picker does (insert reuses the walk).
          t.match(keys, (id) => id % 2 === 0);
          t.insert(keys, `b${o.b}`);
          sent.push({ keys, b: `b${o.b}` });
        } else if (o.k === 'remove') {
          t.removeBackend(`b${o.b}`);
          for (let i = sent.length - 1; i >= 0; i--) if (sent[i]!.b === `b${o.b}`) sent.splice(i, 1);
        } else {
          const keys = Array.from(t.keys(o.text));
          const avail = new Set(o.avail.map((b) => `b${b}`));
          let best = 0;
          const owners = new Set<string>();
          for (const s of sent) {
            if (!avail.has(s.b)) continue;
            let l = 0;
            while (l < keys.length && l < s.keys.length && keys[l] === s.keys[l]) l++;
            if (l > best) {
              best = l;
              owners.clear();
            }
            if (l === best && l > 0) owners.add(s.b);
          }
          const m = t.match(keys, (id) => avail.has(t.nameOf(id)!));
          assert.equal(m.chunks, best);
          assert.deepEqual(m.owners.map((id) => t.nameOf(id)!).sort(), [...owners].sort());
        }
      }
      t.checkInvariants();
    }),
    { numRuns: 300 },
  );
});

test('property: with eviction the bound and invariants hold, and the latest insert stays matchable', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 8 }), fc.array(op, { maxLength: 80 }), (max, ops) => {
      const t = trie(max, 2);
      for (const o of ops) {
        if (o.k === 'insert') {
          const keys = t.keys(o.text);
          t.match(keys, () => true);
          t.insert(keys, `b${o.b}`);
          const m = t.match(keys, (id) => t.nameOf(id) === `b${o.b}`);
          assert.equal(m.chunks, Math.min(keys.length, max));
        } else if (o.k === 'remove') t.removeBackend(`b${o.b}`);
        else t.match(t.keys(o.text), () => true);
        assert.ok(t.size <= max);
        t.checkInvariants();
      }
    }),
    { numRuns: 300 },
  );
});
