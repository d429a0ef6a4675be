/**
 * `npm run bench:predict`: how long the output-length predictor takes per request (issue #17 goal:
 * ≤ 10 µs p99), after learning 2,000 task-mix requests with the task hint. A timing, so a bench,
 * not a unit test. Side by side in the same run: the same requests with the hint supplied.
 */
import { performance } from 'node:perf_hooks';
import { OutputLengthModel, type LengthQuery } from '../src/core/estimators/output-length-model.js';
import { flattenMessages } from '../src/core/prompt.js';
import { percentile } from '../src/report/stats.js';
import { taskMixWorkload } from '../src/workloads/task-mix.js';

const qs: { q: LengthQuery; out: number }[] = taskMixWorkload({ rate: 20, count: 2000 }, 3)
  .start()
  .map(({ request: r }) => {
    const text = `${r.prompt ?? flattenMessages(r.messages ?? [])}\nThis is a ${r.task} task`;
    return { q: { model: r.model, promptTokens: Math.ceil(text.length / 4), text }, out: r.outputTokens };
  });
const m = new OutputLengthModel();
for (const s of qs) m.observe(s.q, s.out);

const REPS = 10;
const times: number[] = [];
const cpu0 = process.cpuUsage();
for (let rep = 0; rep < REPS; rep++)
  for (const s of qs) {
    const t0 = performance.now();
    m.predict(s.q);
    times.push((performance.now() - t0) * 1000);
  }
const cpu = process.cpuUsage(cpu0);
times.sort((a, b) => a - b);
const p99 = percentile(times, 0.99);
console.log(
  `output-length prediction over ${times.length} calls: p50 ${percentile(times, 0.5).toFixed(2)} µs, ` +
    `p99 ${p99.toFixed(2)} µs, p99.9 ${percentile(times, 0.999).toFixed(2)} µs, ` +
    `CPU ${((cpu.user + cpu.system) / times.length).toFixed(2)} µs/call (goal ≤ 10 µs p99: ${p99 <= 10 ? 'PASS' : 'FAIL'})`,
);

// The same requests with the task hint supplied (a configured header) instead of found in the
// prompt by the regex: what finding it costs.
const supplied = qs.map(({ q }) => ({
  ...q,
  text: q.text.slice(0, q.text.lastIndexOf('\nThis is a ')),
  hint: /This is an? (.*) task$/.exec(q.text)?.[1] ?? '',
}));
const t2: number[] = [];
for (let rep = 0; rep < REPS; rep++)
  for (const q of supplied) {
    const t0 = performance.now();
    m.predict(q);
    t2.push((performance.now() - t0) * 1000);
  }
t2.sort((a, b) => a - b);
console.log(
  `hint supplied (no regex): p50 ${percentile(t2, 0.5).toFixed(2)} µs, p99 ${percentile(t2, 0.99).toFixed(2)} µs ` +
    `(found in the prompt / supplied: p50 ×${(percentile(times, 0.5) / percentile(t2, 0.5)).toFixed(2)}, p99 ×${(p99 / percentile(t2, 0.99)).toFixed(2)})`,
);

// The hashed table's size, interleaved call by call so load hits both alike: a prediction reads
// ~140 random rows of it, so a smaller table stays in cache (accuracy: output-length-model.test.ts).
const small = new OutputLengthModel({ dim: 1 << 12 });
for (const s of qs) small.observe(s.q, s.out);
const [tBig, tSmall] = [[], []] as [number[], number[]];
for (let rep = 0; rep < REPS; rep++)
  for (const s of qs) {
    let t0 = performance.now();
    m.predict(s.q);
    tBig.push((performance.now() - t0) * 1000);
    t0 = performance.now();
    small.predict(s.q);
    tSmall.push((performance.now() - t0) * 1000);
  }
tBig.sort((a, b) => a - b);
tSmall.sort((a, b) => a - b);
const fig = (t: number[]): string =>
  `p50 ${percentile(t, 0.5).toFixed(2)} / p99 ${percentile(t, 0.99).toFixed(2)} µs`;
console.log(
  `hashed table 16384 (default): ${fig(tBig)}; 4096: ${fig(tSmall)} (4096 / 16384: p50 ×${(percentile(tSmall, 0.5) / percentile(tBig, 0.5)).toFixed(2)}, p99 ×${(percentile(tSmall, 0.99) / percentile(tBig, 0.99)).toFixed(2)})`,
);
