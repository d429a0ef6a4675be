/**
 * `BENCH_FED_MODE=routers npm run bench:federation` (issue #31's simulator target): N routers in
 * front of one fleet, simulated only. For each scenario (replicas-3: heimdall-burst's pods;
 * replicas-prefix-3: prefix-conversations-8's), each picker and each N, mean E2E and TTFT p90 of
 * independent routers, a shared view, shared state (lagged pushes) and shared state with sequenced
 * pushes, as a multiple of one router's (and one router reading the push log before each pick:
 * the round trip's own cost); then what each lag costs at N = 3.
 *
 * Env: BENCH_FED_ROUTERS (default 2,3,5,8), BENCH_FED_ROUTER_POLICIES (default
 * least-connections,estimated-wait,prefix-trie,workload-aware), BENCH_FED_LAGS (default
 * 10,50,200,500), BENCH_FED_SCENARIOS (default replicas-3,replicas-prefix-3), BENCH_FED_SEED
 * (default 1). Prints markdown tables.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parse, stringify } from 'yaml';
import { parseScenario } from '../src/scenario/load.js';
import type { Scenario } from '../src/scenario/types.js';
import { simulateFederation } from '../src/sim/federation.js';

const list = (v: string | undefined, d: string): string[] => (v ?? d).split(',').filter((x) => x !== '');
const NS = list(process.env.BENCH_FED_ROUTERS, '2,3,5,8').map(Number);
const POLICIES = list(
  process.env.BENCH_FED_ROUTER_POLICIES,
  'least-connections,estimated-wait,prefix-trie,workload-aware',
);
const LAGS = list(process.env.BENCH_FED_LAGS, '10,50,200,500').map(Number);
const SCENARIOS = list(process.env.BENCH_FED_SCENARIOS, 'replicas-3,replicas-prefix-3');
const SEED = Number(process.env.BENCH_FED_SEED ?? 1);

interface Figures {
  readonly e2e: number;
  readonly ttftP90: number;
}

/** The scenario file with `count` routers. */
function withRouters(name: string, count: number): Scenario {
  const doc = parse(readFileSync(new URL(`../scenarios/${name}.yaml`, import.meta.url), 'utf8')) as Record<
    string,
    unknown
  > & { routers: Record<string, unknown> };
  doc.routers = { ...doc.routers, count };
  return parseScenario(stringify(doc), `${name} with ${count} routers (bench/federation-routers.ts)`);
}

/** Runs where a request did not complete (a ratio over fewer requests says little). */
const incomplete: string[] = [];

function run(sc: Scenario, mode: string, params: Record<string, unknown>): Figures {
  const r = simulateFederation(sc, { name: mode, params }, { seed: SEED });
  const ok = r.records.filter((x) => x.ok === true);
  if (ok.length < r.records.length)
    incomplete.push(`${sc.name} ${r.policy} ${JSON.stringify(params)}: ${ok.length}/${r.records.length}`);
  const ttft = ok.map((x) => x.firstTokenS! - x.arrivalS).sort((a, b) => a - b);
  return {
    e2e: ok.reduce((a, x) => a + x.finishS! - x.arrivalS, 0) / Math.max(1, ok.length),
    ttftP90: ttft.length === 0 ? NaN : ttft[Math.min(ttft.length - 1, Math.ceil(0.9 * ttft.length) - 1)]!,
  };
}

const cell = (f: Figures, base: Figures): string =>
  `${(f.e2e / base.e2e).toFixed(3)} / ${(f.ttftP90 / base.ttftP90).toFixed(3)}`;

/** Columns of the N table: how the routers work together. */
const MODES: readonly { label: string; mode: string; params: Record<string, unknown> }[] = [
  { label: 'independent', mode: 'independent', params: {} },
  { label: 'shared-view (counts, 100 ms)', mode: 'shared-view', params: {} },
  { label: 'shared-state (10 ms)', mode: 'shared-state', params: { lagMs: 10 } },
  { label: 'shared-state sequenced (10 ms)', mode: 'shared-state', params: { lagMs: 10, sequenced: true } },
];

export function routersTables(): void {
  const load0 = loadavg()[0]!.toFixed(1);
  const t0 = performance.now();
  for (const name of SCENARIOS) {
    const one = new Map(POLICIES.map((p) => [p, run(withRouters(name, 3), 'single', { policy: p })]));
    // One router that reads the push log before each pick: what the round trip alone costs.
    const oneLog = new Map(
      POLICIES.map((p) => [
        p,
        cell(
          run(withRouters(name, 1), 'shared-state', { policy: p, lagMs: 10, sequenced: true }),
          one.get(p)!,
        ),
      ]),
    );
    console.log(`\n\`${name}\` with N routers: mean E2E / TTFT p90, × one router (seed ${SEED})\n`);
    console.log(
      `| policy | one router (s) | one router, sequenced (10 ms) | N | ${MODES.map((m) => m.label).join(' | ')} |`,
    );
    console.log(`|${' --- |'.repeat(4 + MODES.length)}`);
    for (const p of POLICIES) {
      const base = one.get(p)!;
      for (const n of NS) {
        const sc = withRouters(name, n);
        const cells = MODES.map((m) => cell(run(sc, m.mode, { policy: p, ...m.params }), base));
        console.log(
          `| ${p} | ${base.e2e.toFixed(2)} / ${base.ttftP90.toFixed(2)} | ${oneLog.get(p)!} | ${n} | ${cells.join(' | ')} |`,
        );
      }
    }
    console.log(`\n\`${name}\`, 3 routers: what each lag costs, mean E2E / TTFT p90 × one router\n`);
    console.log(`| policy | pushes | ${LAGS.map((l) => `${l} ms`).join(' | ')} |`);
    console.log(`|${' --- |'.repeat(2 + LAGS.length)}`);
    const sc = withRouters(name, 3);
    for (const p of POLICIES)
      for (const sequenced of [false, true])
        console.log(
          `| ${p} | ${sequenced ? 'sequenced' : 'lagged'} | ${LAGS.map((l) =>
            cell(
              run(sc, 'shared-state', { policy: p, lagMs: l, ...(sequenced ? { sequenced } : {}) }),
              one.get(p)!,
            ),
          ).join(' | ')} |`,
        );
  }
  console.log(
    incomplete.length === 0
      ? '\nEvery request completed in every run.'
      : `\nINCOMPLETE: ${incomplete.join('; ')}`,
  );
  console.log(
    `\n${((performance.now() - t0) / 1000).toFixed(0)} s; load average before ${load0}, after ${loadavg()[0]!.toFixed(1)} (1 min; ${availableParallelism()} cores)`,
  );
}
