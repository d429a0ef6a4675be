/**
 * `npm run bench:federation` (issue #19): three regions live on loopback — a real llmlb Router per
 * region, its emulated engine(s), cross-region latency injected by delaying TCP hops (one per
 * ordered pair of regions) — under region-local, skylb and skylb-ch, each region's clients
 * replayed against its own router. The same reduced scenario is simulated in the same command,
 * and the table puts live and simulated figures side by side with their ratio.
 *
 * Reduced scenario: scenarios/skylb-regions-9.yaml at a third of the scale (1 replica per region,
 * 40 / 13 / 13 users: the same load per replica and the same 3:1:1 skew), 120 s of sending + the
 * drain, time-scaled (engines, hops, peer probes and SP-P scrapes all run TIME_SCALE× faster).
 * Times are reported in model seconds. About 40 s of wall clock per policy.
 *
 * Env: BENCH_FED_TIME_SCALE (default 5), BENCH_FED_POLICIES (default
 * region-local,skylb,skylb-ch,skylb:lendKvBelow=0.6 — `name:key=number` adds a parameter),
 * BENCH_FED_DURATION_S (default 120), BENCH_FED_SEED (default 1), BENCH_FED_OUT (default
 * out/bench-federation: results.json). BENCH_FED_MODE=routers: instead, the simulated N-routers
 * tables of issue #31 (bench/federation-routers.ts).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parse, stringify } from 'yaml';
import type { PolicySpec } from '../src/core/policies/index.js';
import { deriveSeed } from '../src/core/rng.js';
import { benchSettings } from '../src/live-bench/live.js';
import { replay, type ClientRecord } from '../src/live-bench/replay.js';
import { startEngine, type EngineServer } from '../src/engine/server.js';
import { startDelayingHop, type DelayingHop } from '../src/federation/delaying-hop.js';
import { silentLogger } from '../src/log.js';
import { Router } from '../src/proxy/router.js';
import { parseScenario } from '../src/scenario/load.js';
import type { Scenario } from '../src/scenario/types.js';
import { simulateFederation } from '../src/sim/federation.js';
import { federationMode } from '../src/sim/federation-modes.js';
import { monitorLoopDelay } from '../src/live-bench/loop-delay.js';
import { routersTables } from './federation-routers.js';

// N routers in front of one fleet, simulated only (issue #31): bench/federation-routers.ts.
if (process.env.BENCH_FED_MODE === 'routers') {
  routersTables();
  process.exit(0);
}

const TIME_SCALE = Number(process.env.BENCH_FED_TIME_SCALE ?? 5);
const DURATION_S = Number(process.env.BENCH_FED_DURATION_S ?? 120);
const SEED = Number(process.env.BENCH_FED_SEED ?? 1);
/** `skylb:lendKvBelow=0.6` → { name: skylb, lendKvBelow: 0.6 } (the scenario file's form). */
const POLICIES = (process.env.BENCH_FED_POLICIES ?? 'region-local,skylb,skylb-ch,skylb:lendKvBelow=0.6')
  .split(',')
  .map((entry) => {
    const [name, ...params] = entry.split(':');
    if (params.length === 0) return name!;
    const o: Record<string, unknown> = { name };
    for (const p of params) {
      const [k, v] = p.split('=');
      o[k!] = Number(v);
    }
    return o;
  });
const OUT = process.env.BENCH_FED_OUT ?? 'out/bench-federation';

/** skylb-regions-9 at a third of the scale: one replica and a third of the users per region. */
function reducedScenario(): Scenario {
  const path = new URL('../scenarios/skylb-regions-9.yaml', import.meta.url);
  const doc = parse(readFileSync(path, 'utf8')) as Record<string, unknown> & {
    fleet: Record<string, unknown>[];
    regions: { clients: { name: string; clients: number }[] };
    workload: { clients: number };
  };
  doc.name = 'skylb-regions-3-reduced';
  doc.durationS = DURATION_S;
  doc.graceS = 60;
  doc.fleet = doc.fleet.map((f) => ({ ...f, count: 1 }));
  doc.regions.clients = doc.regions.clients.map((r) => ({ ...r, clients: Math.round(r.clients / 3) }));
  doc.workload.clients = doc.regions.clients.reduce((a, r) => a + r.clients, 0);
  doc.policies = POLICIES;
  return parseScenario(stringify(doc), 'skylb-regions-9 reduced (bench/federation.ts)');
}

/** One request as both the simulator and the live clients record it (model seconds). */
interface Rec {
  readonly id: string;
  readonly arrivalS: number;
  readonly firstTokenS: number | undefined;
  readonly finishS: number | undefined;
  readonly backend: string | undefined;
  readonly ok: boolean;
}

interface RegionFigures {
  readonly region: string;
  readonly requests: number;
  readonly completed: number;
  /** Completions inside the send window ÷ its length (closed-loop: the drain tail is not counted). */
  readonly reqPerS: number;
  readonly ttftP50: number;
  readonly ttftP90: number;
  readonly e2eMean: number;
  /** Completed requests served by another region's replica. */
  readonly forwardedShare: number;
}

const pct = (sorted: readonly number[], q: number): number =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;

function figures(sc: Scenario, records: readonly Rec[]): RegionFigures[] {
  const regionOf = new Map(sc.fleet.map((b) => [b.name, b.region ?? '']));
  const regions = sc.regions!.list.map((r) => r.name);
  return [...regions, 'all'].map((region) => {
    const mine = records.filter((r) => region === 'all' || r.id.startsWith(`${region}-`));
    const ok = mine.filter((r) => r.ok && r.finishS !== undefined && r.firstTokenS !== undefined);
    const ttft = ok.map((r) => r.firstTokenS! - r.arrivalS).sort((a, b) => a - b);
    const forwarded = ok.filter((r) => {
      const home = regions.find((n) => r.id.startsWith(`${n}-`));
      return r.backend !== undefined && regionOf.get(r.backend) !== home;
    }).length;
    return {
      region,
      requests: mine.length,
      completed: ok.length,
      reqPerS: ok.filter((r) => r.finishS! <= sc.durationS).length / sc.durationS,
      ttftP50: pct(ttft, 0.5),
      ttftP90: pct(ttft, 0.9),
      e2eMean: ok.reduce((a, r) => a + r.finishS! - r.arrivalS, 0) / Math.max(1, ok.length),
      forwardedShare: forwarded / Math.max(1, ok.length),
    };
  });
}

interface LiveResult {
  readonly records: readonly ClientRecord[];
  /** Per router: requests it forwarded to each peer, as its Federation counted them. */
  readonly forwardedByRouter: Record<string, number>;
  /** Of those, forwarded after waiting in the router queue (Algorithm 1 at the queue head). */
  readonly fromQueueByRouter: Record<string, number>;
  readonly wallS: number;
  readonly cpuS: number;
  readonly loopDelayP99Ms: number;
}

/** One policy live: engines, hops, a Router per region; every region's clients at once. */
async function runLive(sc: Scenario, spec: PolicySpec): Promise<LiveResult> {
  const mode = federationMode(spec, 'regions');
  const regions = sc.regions!;
  const names = regions.list.map((r) => r.name);
  const engines: EngineServer[] = [];
  const hops: { hop: DelayingHop; to: string }[] = [];
  const routers = new Map<string, { router: Router; url: string }>();
  const wall0 = performance.now();
  const cpu0 = process.cpuUsage();
  let lag: ReturnType<typeof monitorLoopDelay> | undefined;
  try {
    for (const b of sc.fleet)
      engines.push(
        await startEngine({
          port: 0,
          api: 'both',
          models: b.models,
          profile: b.profile,
          timeScale: TIME_SCALE,
          seed: deriveSeed(SEED, b.name),
          name: b.name,
        }),
      );
    // hop[from][to] fronts `to`'s router with the from→to latency (scaled to real time).
    const hop = new Map<string, DelayingHop>();
    if (mode.forwarding)
      for (const from of names)
        for (const to of names) {
          if (from === to) continue;
          const h = await startDelayingHop(0, (regions.oneWayS(from, to) * 1000) / TIME_SCALE);
          hops.push({ hop: h, to });
          hop.set(`${from}>${to}`, h);
        }
    for (const region of names) {
      const idx = sc.fleet.flatMap((b, i) => (b.region === region ? [i] : []));
      const sub: Scenario = { ...sc, fleet: idx.map((i) => sc.fleet[i]!) };
      const base = benchSettings(
        sub,
        idx.map((i) => engines[i]!),
        mode.local,
        TIME_SCALE,
      );
      const settings = mode.forwarding
        ? {
            ...base,
            region,
            peers: names
              .filter((p) => p !== region)
              .map((p) => ({ name: p, url: hop.get(`${region}>${p}`)!.url, region: p })),
            federation: {
              probeIntervalMs: Math.max(1, Math.round((regions.peerProbeS * 1000) / TIME_SCALE)),
              probeTimeoutMs: 2000,
              tau: regions.tau,
              lendKvBelow: mode.lendKvBelow,
              peerSelection: mode.forwarding,
              ejectMs: 10_000,
              snapshotMaxEntries: 100_000,
            },
          }
        : base;
      const router = new Router(settings, silentLogger());
      routers.set(region, { router, url: await router.listen('127.0.0.1', 0) });
    }
    for (const { hop: h, to } of hops) h.target = Number(new URL(routers.get(to)!.url).port);
    // Every router has heard from its peers before the clients start (the simulator's routers
    // have statuses one one-way latency after t = 0).
    const end = Date.now() + 5000;
    if (mode.forwarding)
      while (
        names.some((n) => routers.get(n)!.router.peers!.available(Date.now()).length < names.length - 1)
      ) {
        if (Date.now() > end) throw new Error('peers did not answer their probes within 5 s');
        await new Promise((ok) => setTimeout(ok, 20));
      }
    lag = monitorLoopDelay();
    const perRegion = await Promise.all(
      regions.list.map((r) =>
        replay(r.createDriver(deriveSeed(SEED, `region:${r.name}`)), {
          baseUrl: routers.get(r.name)!.url,
          timeScale: TIME_SCALE,
          durationS: sc.durationS,
          graceS: sc.graceS,
        }),
      ),
    );
    lag.stop();
    const forwardedByRouter: Record<string, number> = Object.create(null) as Record<string, number>;
    const fromQueueByRouter: Record<string, number> = Object.create(null) as Record<string, number>;
    for (const [n, { router }] of routers) {
      forwardedByRouter[n] = (router.peers?.describe(Date.now()) ?? []).reduce((a, p) => a + p.forwarded, 0);
      fromQueueByRouter[n] = router.queuedForwards?.forwarded ?? 0;
    }
    const cpu = process.cpuUsage(cpu0);
    return {
      records: perRegion.flat(),
      forwardedByRouter,
      fromQueueByRouter,
      wallS: (performance.now() - wall0) / 1000,
      cpuS: (cpu.user + cpu.system) / 1e6,
      loopDelayP99Ms: lag.read().p99,
    };
  } finally {
    lag?.stop();
    for (const { router } of routers.values()) await router.close();
    await Promise.all(hops.map((h) => h.hop.close()));
    await Promise.all(engines.map((e) => e.close()));
  }
}

const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '—');
const f3 = (x: number): string => (Number.isFinite(x) ? x.toFixed(3) : '—');
const ratio = (a: number, b: number): string =>
  b > 0 && Number.isFinite(a) ? `${(a / b).toFixed(2)}×` : '—';
const share = (x: number): string => `${(100 * x).toFixed(0)} %`;

const load0 = loadavg()[0]!.toFixed(1);
const sc = reducedScenario();
const t0 = performance.now();
const sim = new Map<string, RegionFigures[]>();
/** One name per policy entry (two skylb entries differ in their parameters). */
const label = (spec: PolicySpec): string => federationMode(spec, 'regions').label;
for (const spec of sc.policies)
  sim.set(
    label(spec),
    figures(
      sc,
      simulateFederation(sc, spec, { seed: SEED }).records.map((r) => ({ ...r, ok: r.ok === true })),
    ),
  );
const simS = (performance.now() - t0) / 1000;
console.error(
  `simulated ${sc.policies.length} policies in ${simS.toFixed(1)} s; live at ${TIME_SCALE}× time scale...`,
);

const live = new Map<string, { figs: RegionFigures[]; run: LiveResult }>();
for (const spec of sc.policies) {
  const run = await runLive(sc, spec);
  live.set(label(spec), { figs: figures(sc, run.records), run });
  console.error(
    `  ${label(spec)}: ${run.records.length} requests in ${run.wallS.toFixed(1)} s wall, CPU ${run.cpuS.toFixed(1)} s, ` +
      `event-loop delay p99 ${run.loopDelayP99Ms.toFixed(1)} ms, forwarded ${JSON.stringify(run.forwardedByRouter)} ` +
      `(from the queue ${JSON.stringify(run.fromQueueByRouter)})`,
  );
}

const header =
  '| policy | region | req/s live | sim | live/sim | TTFT p50 s live | sim | live/sim | TTFT p90 s live | sim | E2E mean s live | sim | live/sim | forwarded live | sim |';
const rows: string[] = [header, `|${' --- |'.repeat(15)}`];
for (const spec of sc.policies) {
  const l = live.get(label(spec))!.figs;
  const s = sim.get(label(spec))!;
  l.forEach((a, i) => {
    const b = s[i]!;
    rows.push(
      `| ${label(spec)} | ${a.region} | ${f3(a.reqPerS)} | ${f3(b.reqPerS)} | ${ratio(a.reqPerS, b.reqPerS)} | ${f2(a.ttftP50)} | ${f2(b.ttftP50)} | ${ratio(a.ttftP50, b.ttftP50)} | ${f2(a.ttftP90)} | ${f2(b.ttftP90)} | ${f2(a.e2eMean)} | ${f2(b.e2eMean)} | ${ratio(a.e2eMean, b.e2eMean)} | ${share(a.forwardedShare)} | ${share(b.forwardedShare)} |`,
    );
  });
}
console.log(
  `${sc.name}: ${sc.fleet.length} replicas (${sc.regions!.list.map((r) => `${r.name} ${r.clients} users`).join(', ')}), ` +
    `${sc.durationS} s sending, ${sc.regions!.oneWayS('us', 'eu') * 1000} ms one way; live at ${TIME_SCALE}× time scale, seed ${SEED}; model seconds`,
);
console.log(rows.join('\n'));
const base = live.get('region-local')?.figs.at(-1);
if (base)
  for (const spec of sc.policies.filter((p) => p.name !== 'region-local')) {
    const a = live.get(label(spec))!.figs.at(-1)!;
    const simBase = sim.get('region-local')!.at(-1)!;
    const b = sim.get(label(spec))!.at(-1)!;
    console.log(
      `${label(spec)} vs region-local, all regions: req/s ${ratio(a.reqPerS, base.reqPerS)} live, ${ratio(b.reqPerS, simBase.reqPerS)} sim; ` +
        `TTFT p50 ${f2(a.ttftP50 - base.ttftP50)} s live, ${f2(b.ttftP50 - simBase.ttftP50)} s sim (1 RTT = ${f2(2 * sc.regions!.oneWayS('us', 'eu'))} s)`,
    );
  }
for (const spec of sc.policies) {
  const r = live.get(label(spec))!.run;
  console.log(
    `live ${label(spec)}: ${r.records.length} requests, ${r.wallS.toFixed(1)} s wall, CPU ${r.cpuS.toFixed(1)} s, ` +
      `event-loop delay p99 ${r.loopDelayP99Ms.toFixed(1)} ms real = ${((r.loopDelayP99Ms * TIME_SCALE) / 1000).toFixed(2)} s model`,
  );
}
// A starved event loop delays every client, router and engine alike: past one cross-region round
// trip in model time, live latencies say more about the machine than about federation.
const starved = sc.policies.filter(
  (p) => (live.get(label(p))!.run.loopDelayP99Ms * TIME_SCALE) / 1000 > 2 * sc.regions!.oneWayS('us', 'eu'),
);
if (starved.length > 0)
  console.log(
    `WARNING: event-loop delay p99 above one cross-region round trip (model time) under ${starved.map(label).join(', ')}: ` +
      'the machine was too busy for these live figures; rerun on a quiet one or with a lower BENCH_FED_TIME_SCALE',
  );
console.log(
  `load average before ${load0}, after ${loadavg()[0]!.toFixed(1)} (1 min; ${availableParallelism()} cores)`,
);
console.log(`whole command ${((performance.now() - t0) / 1000).toFixed(1)} s`);
mkdirSync(OUT, { recursive: true });
writeFileSync(
  join(OUT, 'results.json'),
  JSON.stringify(
    {
      scenario: sc.name,
      timeScale: TIME_SCALE,
      seed: SEED,
      policies: sc.policies.map((p) => ({
        policy: label(p),
        live: live.get(label(p))!.figs,
        sim: sim.get(label(p))!,
        forwardedByRouter: live.get(label(p))!.run.forwardedByRouter,
        fromQueueByRouter: live.get(label(p))!.run.fromQueueByRouter,
        wallS: live.get(label(p))!.run.wallS,
      })),
    },
    null,
    2,
  ) + '\n',
);
