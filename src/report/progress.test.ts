import { test } from 'node:test';
import assert from 'node:assert/strict';
import { progressBar, progressLine } from './progress.js';

test('the line shows the share done, the counts and whole seconds', () => {
  assert.equal(
    progressLine('p', 1, 4, 2500, 8),
    'p [\u2588\u2588\u2591\u2591\u2591\u2591\u2591\u2591] 1 done / 4 sent | 2s',
  );
  assert.equal(progressLine('p', 0, 0, 0, 2), 'p [\u2591\u2591] 0 done / 0 sent | 0s');
  assert.equal(progressLine('p', 9, 4, 0, 2), 'p [\u2588\u2588] 9 done / 4 sent | 0s');
});

test('redraws at most every everyMs, and stop draws the last state and ends the line', () => {
  let t = 0;
  const out: string[] = [];
  const bar = progressBar('x', { write: (s) => out.push(s) }, { width: 2, everyMs: 100, clock: () => t });
  bar.update(1, 2);
  t = 50;
  bar.update(2, 2); // too soon: not drawn
  assert.equal(out.length, 1);
  t = 150;
  bar.update(2, 3);
  bar.stop();
  assert.deepEqual(out, [
    '\rx [\u2588\u2591] 1 done / 2 sent | 0s',
    '\rx [\u2588\u2591] 2 done / 3 sent | 0s',
    '\rx [\u2588\u2591] 2 done / 3 sent | 0s',
    '\n',
  ]);
});
