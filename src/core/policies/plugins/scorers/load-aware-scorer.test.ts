import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, scoresOf } from '../../../testing.js';

const m = (waiting: number) => ({ running: 1, waiting, kvUsage: 0, at: 0 });

test("load-aware-scorer follows llm-d's code: empty 0.5, else 0.5·(1 − min(w, T)/T)", () => {
  const s = makePlugin('scorer', 'load-aware-scorer', { threshold: 10 });
  const bs = [0, 1, 5, 10, 50].map((w, i) => backendView(`b${i}`, i, { metrics: m(w) }));
  const got = scoresOf(s, requestInfo('r'), bs);
  assert.deepEqual(got, [0.5, 0.45, 0.25, 0, 0]);
  // Higher is lighter, as every scorer: never above the empty backend's score.
  for (const v of got) assert.ok(v <= 0.5);
});

test('load-aware-scorer rejects a bad threshold at construction', () => {
  assert.throws(() => makePlugin('scorer', 'load-aware-scorer', { threshold: 0 }), /threshold/);
  assert.throws(() => makePlugin('scorer', 'load-aware-scorer', { treshold: 5 }), /treshold/);
});
