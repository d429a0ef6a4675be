import { test } from 'node:test';
import assert from 'node:assert/strict';
import { heapPush, heapReplaceTop } from './heap.js';

test('heap: pushes keep the minimum on top; replacing the top keeps a heap', () => {
  const h = new Float64Array(16);
  const values = [5, 3, 8, 1, 9, 2, 7];
  values.forEach((v, i) => heapPush(h, i, v));
  assert.equal(h[0], 1);
  // Replace the top with larger values, one after another: the top is always the current minimum.
  const live = values.slice().sort((a, b) => a - b);
  for (const v of [4, 10, 6, 0.5]) {
    heapReplaceTop(h, live.length, v);
    live.shift();
    live.push(v);
    live.sort((a, b) => a - b);
    assert.equal(h[0], live[0]);
  }
  // Every parent is ≤ its children.
  for (let i = 1; i < live.length; i++) assert.ok(h[(i - 1) >> 1]! <= h[i]!, `heap order at ${i}`);
});
