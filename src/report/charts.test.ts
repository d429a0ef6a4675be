import { test } from 'node:test';
import assert from 'node:assert/strict';
import { latencyCdf, overTime, queues, renderSvg, ROUTER_QUEUE } from './charts.js';

const run = (policy: string) => ({
  policy,
  records: [
    { id: 'a', arrivalS: 0, finishS: 2, backend: 'x', ok: true },
    { id: 'b', arrivalS: 1, finishS: 5, backend: 'y', ok: true },
    { id: 'c', arrivalS: 1, backend: 'y', ok: undefined },
  ],
});

test('chart data: CDF to 1, OllamaRouter cumulative series, live queue steps', () => {
  const cdf = latencyCdf([run('p')]);
  assert.deepEqual(
    cdf.map((r) => [r.latencyS, r.fraction]),
    [
      [2, 0.5],
      [4, 1],
    ],
  );
  // Completion rate counts unfinished requests as sent; throughput = completed / elapsed since the first arrival.
  assert.deepEqual(
    overTime([run('p')]).map((r) => [r.t, r.meanWaitS, r.completionRate, r.throughputRps]),
    [
      [2, 2, 1 / 3, 0.5],
      [5, 3, 2 / 3, 0.4],
    ],
  );
  // Without samples (live runs): +1 at arrival, −1 at finish, per backend.
  assert.deepEqual(
    queues([run('p')]).map((r) => [r.t, r.backend, r.outstanding]),
    [
      [0, 'x', 1],
      [1, 'y', 1],
      [1, 'y', 2],
      [2, 'x', 0],
      [5, 'y', 1],
    ],
  );
  // Simulated: sampled levels, plus the router queue when it ever held something.
  const sampled = queues([
    {
      ...run('p'),
      samples: [{ t: 0, backend: 'x', outstanding: 3 }],
      routerSamples: [
        { t: 0, queued: 0 },
        { t: 1, queued: 2 },
      ],
    },
  ]);
  assert.deepEqual(
    sampled.map((r) => [r.t, r.backend, r.outstanding]),
    [
      [0, 'x', 3],
      [0, ROUTER_QUEUE, 0],
      [1, ROUTER_QUEUE, 2],
    ],
  );
});

test('renderSvg compiles vega-lite and renders headless SVG', async () => {
  const svg = await renderSvg({
    data: { values: [{ x: 1, p: 'my-policy' }] },
    mark: 'point',
    encoding: { x: { field: 'x', type: 'quantitative' }, color: { field: 'p', type: 'nominal' } },
  });
  assert.match(svg, /^<svg/);
  assert.match(svg, /my-policy/);
});
