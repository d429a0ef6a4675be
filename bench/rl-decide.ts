/**
 * `node --import tsx bench/rl-decide.ts` (or compiled, see below): how long one `rl` decision
 * takes at 16 backends (issue #17: ≤ 50 µs p99) — the policy's pick plus onDispatch, about 40
 * requests in flight per backend, completions between decisions so the tracker's state moves.
 * Two layouts side by side in one run, the same request stream for both:
 * - shared head: the shipped policies/rl-mixed-4x.json network (trained on 4 backends, scoring
 *   each of the 16 candidates and "wait" with one small network);
 * - flat: the older layout, one 101→64→64→17 network over all 16 slots (the performance-aware router's 64×64).
 * Figures to stdout and bench-out/rl-decide.json. RL_WEIGHTS=file measures another weights file.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { rl, stateSize } from '../src/core/policies/builtin/rl.js';
import { createRng } from '../src/core/rng.js';
import { backendView, requestInfo } from '../src/core/testing.js';
import { chosen } from '../src/core/types.js';
import type { BackendView, Policy, RequestInfo } from '../src/core/types.js';
import { percentile } from '../src/report/stats.js';
import { Mlp } from '../src/rl/mlp.js';

const M = Number(process.env.RL_BACKENDS ?? 16);
const N = Number(process.env.RL_DECISIONS ?? 20_000);
const WARMUP = 3_000;
const IN_FLIGHT = 40;

const shipped = JSON.parse(
  readFileSync(process.env.RL_WEIGHTS ?? new URL('../policies/rl-mixed-4x.json', import.meta.url), 'utf8'),
) as Record<string, unknown>;
const docs: Record<string, Record<string, unknown>> = {
  'shared head (shipped)': { ...shipped, kvCapacityTokens: 1 << 20 },
  'flat 64×64': {
    kind: 'llmlb-rl',
    backends: M,
    bucketEdges: [250, 1000],
    kvCapacityTokens: 1 << 20,
    net: new Mlp([stateSize(M, 3), 64, 64, M + 1], createRng(7)).toJSON(),
  },
};

interface Figures {
  p50Us: number;
  p90Us: number;
  p99Us: number;
  maxUs: number;
  cpuUsPerDecision: number;
}

function run(policy: Policy): Figures {
  const rnd = createRng(7);
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
    const b = chosen(policy.pick(req, views, now)) ?? views[0]!;
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
  return {
    p50Us: percentile(times, 0.5),
    p90Us: percentile(times, 0.9),
    p99Us: percentile(times, 0.99),
    maxUs: times[times.length - 1]!,
    // CPU time per decision (incl. the bench's own completions): unaffected by descheduling on a busy box.
    cpuUsPerDecision: (cpu.user + cpu.system) / N,
  };
}

const results: Record<string, Figures> = {};
for (const [label, doc] of Object.entries(docs)) {
  results[label] = run(rl({ random: createRng(1), params: { weights: doc } }));
  const r = results[label];
  console.log(
    `${label.padEnd(22)} at ${M} backends: p50 ${r.p50Us.toFixed(1)} µs, p90 ${r.p90Us.toFixed(1)} µs, p99 ${r.p99Us.toFixed(1)} µs, max ${r.maxUs.toFixed(0)} µs, CPU ${r.cpuUsPerDecision.toFixed(1)} µs/decision`,
  );
}
const [a, b] = Object.values(results) as [Figures, Figures];
const load1 = loadavg()[0] ?? 0;
console.log(
  `shared head / flat: p50 ×${(a.p50Us / b.p50Us).toFixed(2)}, p99 ×${(a.p99Us / b.p99Us).toFixed(2)} (load ${load1.toFixed(1)}; goal p99 ≤ 50 µs: ${a.p99Us <= 50 ? 'PASS' : 'FAIL'})`,
);
mkdirSync('bench-out', { recursive: true });
writeFileSync(
  'bench-out/rl-decide.json',
  JSON.stringify({ backends: M, decisions: N, load1, results }, null, 2) + '\n',
);
