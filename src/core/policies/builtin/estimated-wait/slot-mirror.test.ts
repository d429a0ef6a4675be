import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SlotMirror } from './slot-mirror.js';

const A = 'a'.repeat(100);
const B = 'b'.repeat(100);
const C = 'c'.repeat(100);

test('slot mirror: two slots keep the last two prompts; a third evicts the least recently used', () => {
  const m = new SlotMirror();
  assert.equal(m.cachedChars('e', A + '?'), 0, 'nothing sent');
  for (const [id, text] of [
    ['a', A],
    ['b', B],
  ] as const) {
    m.push('e', 2, id, text);
    m.finish('e', id);
  }
  assert.equal(m.cachedChars('e', A + '?'), 100);
  assert.equal(m.cachedChars('e', B + '?'), 100);
  m.push('e', 2, 'c', C);
  m.finish('e', 'c');
  assert.equal(m.cachedChars('e', A + '?'), 0, "C took A's slot, the older");
  assert.equal(m.cachedChars('e', B + '?'), 100);
});

test('slot mirror: nothing is credited beside a running read of the same prompt while a slot is free', () => {
  const m = new SlotMirror();
  m.push('e', 2, 'a', A);
  m.finish('e', 'a');
  m.push('e', 2, 'a2', A + '1');
  // A runs in its slot; the other slot is free and holds nothing of A: llama.cpp runs it there.
  assert.equal(m.cachedChars('e', A + '2'), 0);
  m.push('e', 2, 'b', B);
  // Both busy: a new A read waits, and may get A's slot when it frees.
  assert.equal(m.cachedChars('e', A + '2'), 100);
  m.push('e', 2, 'a3', A + '3');
  m.finish('e', 'a2');
  // a3 (waiting) took A's slot, sharing 100 characters; b's slot is still busy.
  assert.equal(m.cachedChars('e', A + '4'), 100, 'all busy again');
  m.finish('e', 'b');
  assert.equal(m.cachedChars('e', A + '4'), 0, "B's slot is free; A's runs a3");
  assert.equal(m.cachedChars('e', B + '?'), 100);
});

test('slot mirror: a request that ends while waiting leaves the queue', () => {
  const m = new SlotMirror();
  m.push('e', 1, 'a', A);
  m.push('e', 1, 'b', B);
  m.finish('e', 'b');
  m.finish('e', 'a');
  assert.equal(m.cachedChars('e', A), 100, 'b never ran: the slot still keeps A');
  m.removeBackend('e');
  assert.equal(m.cachedChars('e', A), 0);
});

test('slot mirror: what a push would evict — the slot it takes, unless another slot holds that prompt', () => {
  const m = new SlotMirror(10);
  m.push('e', 2, 'a', A);
  m.finish('e', 'a');
  assert.equal(m.evictedChars('e', B), 0, 'B takes the empty slot');
  m.push('e', 2, 'b', B);
  m.finish('e', 'b');
  assert.equal(m.evictedChars('e', C), 100, "C takes A's slot, the older, and A is nowhere else");
  assert.equal(m.evictedChars('e', A + '?'), 0, "A's re-read keeps A");
  m.push('f', 1, 'a2', A + '!');
  assert.equal(m.evictedChars('e', C), 0, 'f holds A too (busy or not): a copy stays');
  m.push('e', 2, 'c', C);
  assert.equal(
    m.evictedChars('e', C),
    100,
    "C runs in A's slot: another C read takes B's, held nowhere else",
  );
  m.push('e', 2, 'd', A);
  assert.equal(m.evictedChars('e', B), 0, 'both busy: it waits, the slot it gets is not known');
  assert.equal(m.evictedChars('g', A), 0, 'an engine sent nothing');
});

test('slot mirror: a few shared characters do not pick a slot (whole chunks, then least recently used)', () => {
  const m = new SlotMirror(10);
  m.push('e', 2, 'a', 'Document ' + A);
  m.finish('e', 'a');
  // 'Document ' (9 characters, under a chunk) is no match: the empty slot, older, takes it.
  assert.equal(m.evictedChars('e', 'Document ' + B), 0);
  assert.equal(new SlotMirror().evictedChars('e', 'x'), 0);
});

test('slot mirror: what slots share follows their prompts as they change and as engines leave', () => {
  const m = new SlotMirror(10);
  m.push('e', 1, 'a', A);
  m.finish('e', 'a');
  m.push('f', 1, 'a2', A + '!');
  m.finish('f', 'a2');
  assert.equal(m.evictedChars('e', C), 0, 'f keeps A too');
  // f's slot turns to B: e's A is now held nowhere else.
  m.push('f', 1, 'b', B);
  m.finish('f', 'b');
  assert.equal(m.evictedChars('e', C), 100);
  // f holds A again, then leaves the fleet: its copy goes with it.
  m.push('f', 1, 'a3', A + '?');
  m.finish('f', 'a3');
  assert.equal(m.evictedChars('e', C), 0);
  m.removeBackend('f');
  assert.equal(m.evictedChars('e', C), 100);
  // An engine whose slot count changes starts over: its old slots are no copy.
  m.push('g', 1, 'a4', A);
  m.finish('g', 'a4');
  assert.equal(m.evictedChars('e', C), 0);
  m.push('g', 2, 'c', C);
  m.finish('g', 'c');
  assert.equal(m.evictedChars('e', B), 100);
});
