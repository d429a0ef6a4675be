import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatLoopDelay, loopDelayOf, monitorLoopDelay } from './loop-delay.js';

/** A histogram stand-in with fixed statistics, in ns as Node's are. */
const histogram = (ms: { mean: number; p99: number; max: number }, count = 100) => ({
  mean: ms.mean * 1e6,
  max: ms.max * 1e6,
  percentile: (p: number) => (p === 99 ? ms.p99 * 1e6 : NaN),
  count,
});

test('the sampling period is not reported as delay', () => {
  // An idle loop sampled every 10 ms: Node reads ~10 ms between samples; none of it is delay.
  assert.deepEqual(loopDelayOf(histogram({ mean: 10.25, p99: 10.5, max: 35 }), 10), {
    mean: 0.25,
    p99: 0.5,
    max: 25,
    resolutionMs: 10,
  });
  // Timers fire a hair early now and then: never a negative delay.
  assert.equal(loopDelayOf(histogram({ mean: 0.9, p99: 0.95, max: 1 }), 1).mean, 0);
  // No samples (a run shorter than the period): Node's NaN mean is not passed on.
  assert.deepEqual(loopDelayOf(histogram({ mean: NaN, p99: 0, max: 0 }, 0), 1), {
    mean: 0,
    p99: 0,
    max: 0,
    resolutionMs: 1,
  });
});

test('a blocked loop shows; the report names the sampling period', async () => {
  const m = monitorLoopDelay();
  await new Promise((r) => setTimeout(r, 5));
  const end = performance.now() + 60;
  while (performance.now() < end); // block the loop for 60 ms
  await new Promise((r) => setTimeout(r, 5));
  const d = m.read();
  m.stop();
  assert.ok(d.max >= 50, `max ${d.max} ms`);
  assert.equal(d.resolutionMs, 1);
  assert.match(formatLoopDelay(d), /^mean \d+\.\d ms, p99 \d+\.\d ms, max \d+ ms \(sampled every 1 ms\)$/);
});
