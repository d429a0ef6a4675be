/**
 * `tsx bench/estimate-error.ts <scenario.yaml> ['{"param":value}'] [--seed N]`: runs estimated-wait
 * (with those parameters) in the simulator and compares each decision's estimate (seconds until the
 * request finishes on the backend it chose) with what the request then really took, and reports
 * how balanced its choices were, and per request label (heimdall-burst: HEAVY, SHORT, MED, …) the
 * mean estimate, actual time and router wait. The measurement behind issue #20 (docs/results.md).
 */
import { estimatedWait } from '../src/core/policies/builtin/estimated-wait/index.js';
import { createRng, deriveSeed } from '../src/core/rng.js';
import { isHold } from '../src/core/types.js';
import type { BackendView, Policy } from '../src/core/types.js';
import { loadScenario } from '../src/scenario/load.js';
import { simulateWith } from '../src/sim/simulator.js';

const path = process.argv[2];
if (!path) throw new Error('usage: tsx bench/estimate-error.ts <scenario.yaml>');
const seedAt = process.argv.indexOf('--seed');
const loaded = loadScenario(path);
const scenario = seedAt > 0 ? { ...loaded, seed: Number(process.argv[seedAt + 1]) } : loaded;
const paramsArg = process.argv[3]?.startsWith('{') ? process.argv[3] : undefined;
const params = paramsArg ? (JSON.parse(paramsArg) as Record<string, unknown>) : {};
const inner = estimatedWait({ random: createRng(deriveSeed(scenario.seed, 'policy')), params });

interface Decision {
  estimate: number;
  inFlight: number;
  minInFlight: number;
  maxInFlight: number;
  /** Chosen estimate minus the lowest estimate among the least-loaded candidates. */
  spread: number;
}
const decisions = new Map<string, Decision>();
const buf = new Float64Array(64);
const policy: Policy = {
  ...inner,
  name: inner.name,
  pick(req, candidates: readonly BackendView[], now) {
    // Estimates first (on a copy of the decision count, they would advance it: read, then pick).
    inner.estimates(req, candidates, now, buf);
    const chosen = inner.pick(req, candidates, now);
    if (!isHold(chosen)) {
      const i = candidates.indexOf(chosen);
      let minIf = Infinity;
      let maxIf = 0;
      for (const c of candidates) {
        minIf = Math.min(minIf, c.inFlight);
        maxIf = Math.max(maxIf, c.inFlight);
      }
      decisions.set(req.id, {
        estimate: buf[i]!,
        inFlight: chosen.inFlight,
        minInFlight: minIf,
        maxInFlight: maxIf,
        spread: 0,
      });
    }
    return chosen;
  },
};
const run = simulateWith(scenario, policy, 'estimated-wait', { seed: scenario.seed, sampleEveryS: Infinity });

let n = 0;
let sumEst = 0;
let sumAct = 0;
let sumAbs = 0;
let sxy = 0;
let sxx = 0;
let syy = 0;
let notLeast = 0;
let excess = 0;
const rows: [number, number][] = [];
for (const r of run.records) {
  const d = decisions.get(r.id);
  if (!d || r.ok !== true || r.finishS === undefined || r.dispatchS === undefined) continue;
  const actual = r.finishS - r.dispatchS;
  n++;
  sumEst += d.estimate;
  sumAct += actual;
  sumAbs += Math.abs(d.estimate - actual);
  rows.push([d.estimate, actual]);
  if (d.inFlight > d.minInFlight) notLeast++;
  excess += d.inFlight - d.minInFlight;
}
const me = sumEst / n;
const ma = sumAct / n;
for (const [e, a] of rows) {
  sxy += (e - me) * (a - ma);
  sxx += (e - me) ** 2;
  syy += (a - ma) ** 2;
}
const perBackend = new Map<string, number>();
for (const r of run.records) if (r.backend) perBackend.set(r.backend, (perBackend.get(r.backend) ?? 0) + 1);
let e2e = 0;
for (const r of run.records) if (r.ok && r.finishS !== undefined) e2e += r.finishS - r.arrivalS;
console.log(`${scenario.name}: ${n} decisions`);
console.log(`  mean E2E ${(e2e / run.records.length).toFixed(2)} s`);
console.log(`  estimate mean ${me.toFixed(2)} s, actual (dispatch→finish) mean ${ma.toFixed(2)} s`);
console.log(
  `  mean |error| ${(sumAbs / n).toFixed(2)} s, correlation ${(sxy / Math.sqrt(sxx * syy)).toFixed(3)}`,
);
console.log(
  `  chose a backend with more in flight than the least loaded: ${((100 * notLeast) / n).toFixed(1)} % ` +
    `(mean excess ${(excess / n).toFixed(2)} requests)`,
);
console.log(`  requests per backend: ${[...perBackend].map(([k, v]) => `${k} ${v}`).join(', ')}`);
const byLabel = new Map<string, { n: number; est: number; act: number; wait: number; e2e: number }>();
for (const r of run.records) {
  const d = decisions.get(r.id);
  if (!d || r.ok !== true || r.finishS === undefined || r.dispatchS === undefined) continue;
  const k = r.label ?? '-';
  const x = byLabel.get(k) ?? { n: 0, est: 0, act: 0, wait: 0, e2e: 0 };
  x.n++;
  x.est += d.estimate;
  x.act += r.finishS - r.dispatchS;
  x.wait += r.dispatchS - r.arrivalS;
  x.e2e += r.finishS - r.arrivalS;
  byLabel.set(k, x);
}
if (byLabel.size > 1)
  for (const [k, x] of byLabel)
    console.log(
      `  ${k}: ${x.n} requests, estimate ${(x.est / x.n).toFixed(2)} s, actual ${(x.act / x.n).toFixed(2)} s, ` +
        `router wait ${(x.wait / x.n).toFixed(2)} s, E2E ${(x.e2e / x.n).toFixed(2)} s`,
    );
for (const b of scenario.fleet) console.log(`  ${b.name}: ${JSON.stringify(inner.describe!(b.name))}`);
