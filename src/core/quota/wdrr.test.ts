import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pickWdrr, roundsNeeded, type DeficitCandidate } from './wdrr.js';

test('rounds needed are computed in closed form', () => {
  assert.equal(roundsNeeded({ name: 'a', weight: 1, deficit: 0 }, 1800, 1000), 2);
  assert.equal(roundsNeeded({ name: 'a', weight: 2, deficit: 0 }, 1800, 1000), 1);
  assert.equal(roundsNeeded({ name: 'a', weight: 1, deficit: 2000 }, 1800, 1000), 0);
});

test('token share follows the weights when every model can always take work', () => {
  const cands: DeficitCandidate[] = [
    { name: 'a', weight: 1, deficit: 0 },
    { name: 'b', weight: 3, deficit: 0 },
  ];
  const served = { a: 0, b: 0 };
  for (let i = 0; i < 4000; i++) {
    const tokens = 200 + ((i * 37) % 900);
    const p = pickWdrr(cands, tokens, 1000)!;
    for (const c of cands) c.deficit += p.rounds * c.weight * 1000;
    const w = cands[p.index]!;
    w.deficit -= tokens;
    served[w.name as 'a' | 'b'] += tokens;
    for (const c of cands) assert.ok(c.deficit < 1100 + c.weight * 1000, 'deficits stay bounded');
  }
  const share = served.b / (served.a + served.b);
  assert.ok(Math.abs(share - 0.75) < 0.02, `b share ${share}`);
});

test('no candidates → null; ties go to the larger deficit per weight, then the name', () => {
  assert.equal(pickWdrr([], 10, 1000), null);
  const p = pickWdrr(
    [
      { name: 'b', weight: 1, deficit: 50 },
      { name: 'a', weight: 1, deficit: 50 },
      { name: 'c', weight: 1, deficit: 80 },
    ],
    10,
    1000,
  )!;
  assert.equal(p.index, 2);
  const q = pickWdrr(
    [
      { name: 'b', weight: 1, deficit: 50 },
      { name: 'a', weight: 1, deficit: 50 },
    ],
    10,
    1000,
  )!;
  assert.equal(q.index, 1);
});
