import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, listOf } from '../../../testing.js';
import { createRng } from '../../../rng.js';

const bs = [backendView('a', 0), backendView('b', 1), backendView('c', 2), backendView('d', 3)];
const req = requestInfo('r');
const names = (xs: readonly { name: string }[]) => xs.map((x) => x.name);

test('max-score-picker: highest total; maxNumOfEndpoints returns the retry order', () => {
  const p = makePlugin('picker', 'max-score-picker', { maxNumOfEndpoints: 3 });
  assert.deepEqual(names(listOf(p.pick(req, bs, Float64Array.from([0.2, 0.9, 0.5, 0.7]), 0))), [
    'b',
    'd',
    'c',
  ]);
  assert.deepEqual(p.pick(req, [], new Float64Array(0), 0), []);
});

test('max-score-picker ties: random spreads them, round-robin rotates them', () => {
  const flat = Float64Array.from([1, 1, 0, 1]);
  const rnd = makePlugin('picker', 'max-score-picker', {}, { random: createRng(3) });
  const seen = new Map<string, number>();
  for (let i = 0; i < 300; i++) {
    const n = listOf(rnd.pick(req, bs, flat, 0))[0]!.name;
    seen.set(n, (seen.get(n) ?? 0) + 1);
  }
  assert.equal(seen.get('c'), undefined);
  for (const n of ['a', 'b', 'd']) assert.ok((seen.get(n) ?? 0) > 60, `${n}: ${seen.get(n)}`);
  const rr = makePlugin('picker', 'max-score-picker', { tieBreaking: 'round-robin' });
  const seq = Array.from({ length: 4 }, () => listOf(rr.pick(req, bs, flat, 0))[0]!.name);
  assert.deepEqual(seq, ['a', 'b', 'd', 'a']);
});

test('random-picker: uniform, distinct endpoints when several are asked for', () => {
  const p = makePlugin('picker', 'random-picker', { maxNumOfEndpoints: 4 }, { random: createRng(9) });
  const got = names(listOf(p.pick(req, bs, new Float64Array(4), 0)));
  assert.deepEqual([...got].sort(), ['a', 'b', 'c', 'd']);
});

test('weighted-random-picker: chance follows score, zero never wins unless all are zero', () => {
  const p = makePlugin('picker', 'weighted-random-picker', {}, { random: createRng(5) });
  const scores = Float64Array.from([3, 1, 0, 0]);
  let a = 0;
  for (let i = 0; i < 2000; i++) {
    const n = listOf(p.pick(req, bs, scores, 0))[0]!.name;
    assert.ok(n === 'a' || n === 'b');
    if (n === 'a') a++;
  }
  assert.ok(a > 1350 && a < 1650, `a won ${a}/2000, expected ~1500`);
  assert.equal(listOf(p.pick(req, bs, new Float64Array(4), 0)).length, 1);
  const many = makePlugin(
    'picker',
    'weighted-random-picker',
    { maxNumOfEndpoints: 2 },
    { random: createRng(1) },
  );
  assert.deepEqual([...names(listOf(many.pick(req, bs, scores, 0)))].sort(), ['a', 'b']);
});

test('round-robin and weighted-round-robin pickers', () => {
  const rr = makePlugin('picker', 'round-robin-picker');
  assert.deepEqual(
    Array.from({ length: 5 }, () => listOf(rr.pick(req, bs, new Float64Array(4), 0))[0]!.name),
    ['a', 'b', 'c', 'd', 'a'],
  );
  const w = makePlugin('picker', 'weighted-round-robin-picker');
  const ws = [backendView('a', 0, { weight: 5 }), backendView('b', 1), backendView('c', 2)];
  assert.deepEqual(
    Array.from({ length: 7 }, () => listOf(w.pick(req, ws, new Float64Array(3), 0))[0]!.name),
    ['a', 'a', 'b', 'a', 'c', 'a', 'a'],
  );
});
