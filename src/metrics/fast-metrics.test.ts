import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Histogram, Registry } from 'prom-client';
import { FastCounter, FastHistogram } from './fast-metrics.js';

const BUCKETS = [0.005, 0.1, 1, 10];

test('a fast histogram and counter print exactly what prom-client prints for the same data', async () => {
  const ours = new Registry();
  const theirs = new Registry();
  const h = new FastHistogram('t_seconds', 'help "text"', ['backend'], BUCKETS, ours);
  const c = new FastCounter('t_total', 'requests', ['backend', 'status'], ours);
  const ph = new Histogram({
    name: 't_seconds',
    help: 'help "text"',
    labelNames: ['backend'],
    buckets: BUCKETS,
    registers: [theirs],
  });
  const pc = new Counter({
    name: 't_total',
    help: 'requests',
    labelNames: ['backend', 'status'],
    registers: [theirs],
  });
  const samples: [string, number][] = [
    ['a', 0.001],
    ['a', 0.005], // on a bound: counted in that bucket
    ['a', 0.5],
    ['b"\\x', 3],
    ['a', 99], // above every bound: only in +Inf, sum and count
    ['b"\\x', 0.1],
  ];
  for (const [b, v] of samples) {
    h.labels(b).observe(v);
    ph.labels(b).observe(v);
    c.labels(b, v > 1 ? '500' : '200').inc();
    pc.labels(b, v > 1 ? '500' : '200').inc();
  }
  c.labels('a', '200').inc(2);
  pc.labels('a', '200').inc(2);
  assert.equal(await ours.metrics(), await theirs.metrics());
  // The same JSON too, but for prom-client's empty exemplar slots (exemplars are off).
  const json = async (r: Registry): Promise<unknown> =>
    JSON.parse(
      JSON.stringify(await r.getMetricsAsJSON(), (k, v: unknown) => (k === 'exemplar' ? undefined : v)),
    );
  assert.deepEqual(await json(ours), await json(theirs));
});

test('bad observations change nothing: NaN and infinities are dropped, counters never go down', async () => {
  const r = new Registry();
  const h = new FastHistogram('x_seconds', 'x', ['backend'], BUCKETS, r);
  const c = new FastCounter('x_total', 'x', ['backend'], r);
  const hc = h.labels('a');
  hc.observe(Number.NaN);
  hc.observe(Number.POSITIVE_INFINITY);
  hc.observe(0.2);
  c.labels('a').inc(-1);
  c.labels('a').inc(Number.NaN);
  c.labels('a').inc();
  assert.equal(hc.count, 1);
  assert.equal(hc.sum, 0.2);
  const text = await r.metrics();
  assert.match(text, /x_total\{backend="a"\} 1\n/);
  assert.doesNotMatch(text, /NaN/);
  assert.throws(() => c.labels('a', 'b'), /expected 1 label values/);
  r.resetMetrics();
  // Zeroed, not dropped: a child resolved before the reset still counts.
  hc.observe(0.3);
  const after = await r.metrics();
  assert.match(after, /x_total\{backend="a"\} 0\n/);
  assert.match(after, /x_seconds_count\{backend="a"\} 1\n/);
  assert.match(after, /x_seconds_sum\{backend="a"\} 0.3\n/);
});
