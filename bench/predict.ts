/**
 * `npm run bench:predict`: how long the output-length predictor takes per request (issue #17 goal:
 * ≤ 10 µs p99), after learning 2,000 task-mix requests with the task hint. A timing, so a bench,
 * not a unit test.
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
const times: number[] = [];
for (let rep = 0; rep < 5; rep++)
  for (const s of qs) {
    const t0 = performance.now();
    m.predict(s.q);
    times.push((performance.now() - t0) * 1000);
  }
times.sort((a, b) => a - b);
const p99 = percentile(times, 0.99);
console.log(
  `output-length prediction over ${times.length} calls: p50 ${percentile(times, 0.5).toFixed(2)} µs, ` +
    `p99 ${p99.toFixed(2)} µs (goal ≤ 10 µs p99: ${p99 <= 10 ? 'PASS' : 'FAIL'})`,
);
