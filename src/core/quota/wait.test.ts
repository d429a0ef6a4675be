import { test } from 'node:test';
import assert from 'node:assert/strict';
import { shapeWait, slotReleaseMs } from './wait.js';

test('hints wake on a tick boundary, within ±10% (+ one tick) of the raw wait, never under 50 ms', () => {
  for (const now of [0, 1234.5, 99_999]) {
    for (const base of [0, 10, 333, 2000, 59_100]) {
      for (const r of [0, 0.25, 0.5, 0.999]) {
        const w = shapeWait(base, now, 100, 50, () => r);
        assert.ok(Number.isInteger(w));
        assert.ok(w >= 50);
        if (w > 50) assert.ok((now + w) % 100 < 1, `wakes at ${now + w}, not on a tick`);
        assert.ok(w >= base * 0.9, 'not below −10%');
        assert.ok(w <= Math.max(50, base * 1.1 + 101), `w=${w} base=${base}`);
      }
    }
  }
});

test('jitter spreads callers told the same wait over several ticks', () => {
  const seen = new Set<number>();
  for (let i = 0; i < 50; i++) seen.add(shapeWait(5000, 0, 100, 50, () => i / 50));
  assert.ok(seen.size >= 8, `only ${seen.size} distinct hints`);
  assert.ok(Math.min(...seen) >= 4500 && Math.max(...seen) <= 5500);
});

test('slot release estimate: fallback without data, mean/(n+1) bounded to [50, 10000]', () => {
  assert.equal(slotReleaseMs(null, 3, 250), 250);
  assert.equal(slotReleaseMs(4000, 3, 250), 1000);
  assert.equal(slotReleaseMs(10, 3, 250), 50);
  assert.equal(slotReleaseMs(1e9, 1, 250), 10_000);
});
