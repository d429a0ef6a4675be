/**
 * `node --import tsx bench/rl-decide.ts`: how long one `rl` decision takes at 16 backends (issue
 * #17: ≤ 50 µs p99): the policy's pick plus onDispatch, with a Q-network sized for 16 backends
 * (seed 004's 64×64 hidden layers), about 40 requests in flight per backend, completions between
 * decisions so the tracker's state moves. Figures to stdout and bench-out/rl-decide.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { rl, stateSize } from '../src/core/policies/rl.js';
import { createRng } from '../src/core/rng.js';
import { backendView, requestInfo } from '../src/core/testing.js';
import type { BackendView, RequestInfo } from '../src/core/types.js';
import { percentile } from '../src/report/stats.js';
import { Mlp } from '../src/rl/mlp.js';

const M = Number(process.env.RL_BACKENDS ?? 16);
const N = Number(process.env.RL_DECISIONS ?? 20_000);
const WARMUP = 2_000;
const IN_FLIGHT = 40;
const rnd = createRng(7);
const net = new Mlp([stateSize(M, 3), 64, 64, M + 1], rnd);
const policy = rl({
  random: rnd,
  params: {
    weights: {
      kind: 'llmlb-rl',
      backends: M,
      bucketEdges: [250, 1000],
      kvCapacityTokens: 1 << 20,
      net: net.toJSON(),
    },
  },
});
const views: BackendView[] = Array.from({ length: M }, (_, i) =>
  backendView(`b${i}`, i, { inFlight: IN_FLIGHT }),
);
const open: { req: RequestInfo; b: BackendView }[] = [];
const words = Array.from({ length: 500 }, (_, i) => `w${i.toString(36)}`);
const text = (n: number): string =>
  Array.from({ length: n }, () => words[Math.floor(rnd() * words.length)]).join(' ');
const times: number[] = [];
let now = 0;
let cpu0 = process.cpuUsage();
for (let i = 0; i < WARMUP + N; i++) {
  now += 5;
  const req = requestInfo(`r${i}`, `This is a qna task. ${text(20 + Math.floor(rnd() * 200))}`, {
    arrivedAt: now,
  });
  const t0 = performance.now();
  const b = policy.pick(req, views, now) ?? views[0]!;
  policy.onDispatch!(req, b, now);
  const dt = performance.now() - t0;
  if (i === WARMUP) cpu0 = process.cpuUsage();
  if (i >= WARMUP) times.push(dt * 1000);
  open.push({ req, b });
  // Keep ~IN_FLIGHT per backend: finish the oldest.
  if (open.length > M * IN_FLIGHT) {
    const done = open.shift()!;
    policy.onComplete!(
      done.req,
      done.b,
      { ok: true, dispatchedAt: now - 1000, finishedAt: now, completionTokens: 100, promptTokens: 50 },
      now,
    );
  }
}
const cpu = process.cpuUsage(cpu0);
times.sort((a, b) => a - b);
const r = {
  backends: M,
  decisions: N,
  p50Us: percentile(times, 0.5),
  p90Us: percentile(times, 0.9),
  p99Us: percentile(times, 0.99),
  maxUs: times[times.length - 1],
  // CPU time per decision (incl. the bench's own completions): unaffected by descheduling on a busy box.
  cpuUsPerDecision: (cpu.user + cpu.system) / N,
  load1: loadavg()[0] ?? 0,
};
console.log(
  `rl decision at ${M} backends: p50 ${r.p50Us.toFixed(1)} µs, p90 ${r.p90Us.toFixed(1)} µs, p99 ${r.p99Us.toFixed(1)} µs, max ${r.maxUs!.toFixed(0)} µs, CPU ${r.cpuUsPerDecision.toFixed(1)} µs/decision (load ${r.load1.toFixed(1)}; goal p99 ≤ 50 µs)`,
);
mkdirSync('bench-out', { recursive: true });
writeFileSync('bench-out/rl-decide.json', JSON.stringify(r, null, 2) + '\n');
