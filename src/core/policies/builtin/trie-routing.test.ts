import { test } from 'node:test';
import assert from 'node:assert/strict';
import { requestInfo } from '../../testing.js';
import { TrieRouting } from './trie-routing.js';

const routing = () => new TrieRouting({ chunkChars: 4, maxEntries: 1000, maxPrefixChars: 1 << 20 });

test('a held request keeps its own keys while others are hashed and dispatched in between', () => {
  const r = routing();
  const a = requestInfo('a', 'aaaabbbbcccc');
  const b = requestInfo('b', 'xxxxyyyyzzzzwwww');
  const c = requestInfo('c', 'ppppqqqq');
  const fresh = (text: string) => Array.from(r.trie.keys(text));
  assert.deepEqual(Array.from(r.keysOf(a)), fresh(a.promptText));
  // a is held: b and c are picked (b dispatched) before a comes back.
  assert.deepEqual(Array.from(r.keysOf(b)), fresh(b.promptText));
  r.dispatched(b, 'B');
  assert.deepEqual(Array.from(r.keysOf(c)), fresh(c.promptText));
  assert.deepEqual(Array.from(r.keysOf(a)), fresh(a.promptText));
  r.dispatched(c, 'C');
  r.dispatched(a, 'A');
  const owner = (text: string) => {
    const m = r.trie.match(r.trie.keys(text), () => true);
    return [m.chars, m.owners.map((id) => r.trie.nameOf(id))];
  };
  assert.deepEqual(owner(a.promptText), [12, ['A']]);
  assert.deepEqual(owner(b.promptText), [16, ['B']]);
  assert.deepEqual(owner(c.promptText), [8, ['C']]);
  r.trie.checkInvariants();
});

test('asking again for the request hashed last returns the same keys without hashing again', () => {
  const r = routing();
  const a = requestInfo('a', 'a'.repeat(400));
  const first = r.keysOf(a);
  assert.equal(r.keysOf(a), first);
  assert.equal(first.length, 100);
});
