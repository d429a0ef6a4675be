import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EngineModel } from './model.js';
import { SlotCache } from './slot-cache.js';
import type { EngineEvent, EngineProfile } from './types.js';

// Hash chains: block i of a prompt covers its blocks 0..i, so two prompts share a prefix of ids.
const A = [1, 2, 3, 4];
const A2 = [1, 2, 3, 9]; // A's first three blocks, another question
const B = [5, 6, 7, 8];
const C = [10, 11, 12, 13];

test('slot cache: the free slot with the longest common prefix, the least recently used on a tie', () => {
  const c = new SlotCache(2);
  const a = c.take(A);
  assert.equal(c.matched, 0);
  const b = c.take(B);
  assert.notEqual(a, b);
  assert.equal(c.take(C), -1, 'both busy');
  c.release(a);
  c.release(b);
  assert.equal(c.take(A2), a, "A's slot");
  assert.equal(c.matched, 3);
  c.release(a);
  // C shares nothing: it overwrites the least recently used slot, B's (released before A2's).
  assert.equal(c.take(C), b);
  assert.equal(c.matched, 0);
  c.release(b);
  assert.equal(c.take(B), a, 'B is gone: the older slot now (A2, released first)');
  assert.equal(c.matched, 0);
});

test('slot cache: a busy slot shares nothing; a finished slot keeps prompt and answer', () => {
  const c = new SlotCache(2);
  const a = c.take(A);
  assert.notEqual(c.take(A), a);
  assert.equal(c.matched, 0, 'the running read of A is not shared');
  c.release(a, [...A, 20, 21]);
  c.take([...A, 20, 21, 22]);
  assert.equal(c.matched, 6, 'the answer is kept too');
});

const P: EngineProfile = {
  slots: 2,
  kvCapacityTokens: 10_000,
  speed: 1,
  baseStepS: 0.01,
  perSeqS: 0,
  perTokenS: 0,
  prefillPerTokenS: 0.001,
  blockSize: 4,
  prefixCacheBlocks: 1000,
};

function cachedOf(m: EngineModel, id: string, hashes: number[], t: number): number {
  m.submit({ id, promptTokens: hashes.length * 4, outputTokens: 1, blockHashes: hashes }, t);
  const all: EngineEvent[] = [];
  for (let u = m.nextEventTime(); u !== undefined; u = m.nextEventTime()) all.push(...m.advance(u));
  const f = all.find((e) => e.type === 'finished' && e.id === id);
  assert.ok(f && f.type === 'finished');
  return f.cachedTokens;
}

test('engine model, cacheMode slots: two slots keep two prompts, a third evicts the older', () => {
  const slots = new EngineModel({ ...P, cacheMode: 'slots' });
  const blocks = new EngineModel(P);
  for (const m of [slots, blocks]) {
    cachedOf(m, 'a', A, 0);
    cachedOf(m, 'b', B, 1);
    cachedOf(m, 'c', C, 2);
  }
  // The block LRU of 1000 blocks keeps all three; two slots kept only B and C.
  assert.equal(cachedOf(blocks, 'a2', A, 3), 15);
  assert.equal(cachedOf(slots, 'a2', A, 3), 0);
  assert.equal(cachedOf(slots, 'c2', C, 4), 15);
  assert.equal(slots.stats().prefixCacheHits, 4, 'blocks found: all of C');
});

test('engine model, cacheMode slots: a request beside a running read of its prompt prefills it all', () => {
  const m = new EngineModel({ ...P, cacheMode: 'slots' });
  cachedOf(m, 'a', A, 0);
  m.submit({ id: 'x', promptTokens: 16, outputTokens: 50, blockHashes: A2 }, 1);
  m.submit({ id: 'y', promptTokens: 16, outputTokens: 1, blockHashes: A }, 1);
  const all: EngineEvent[] = [];
  for (let u = m.nextEventTime(); u !== undefined; u = m.nextEventTime()) all.push(...m.advance(u));
  const got = new Map(all.flatMap((e) => (e.type === 'finished' ? [[e.id, e.cachedTokens] as const] : [])));
  assert.equal(got.get('x'), 12, "x took A's slot");
  assert.equal(got.get('y'), 0, 'y ran in the other slot, which holds nothing of A');
});

test('engine model: cacheMode slots with pagedKv is refused', () => {
  assert.throws(() => new EngineModel({ ...P, cacheMode: 'slots', pagedKv: true }), /cacheMode/);
});
