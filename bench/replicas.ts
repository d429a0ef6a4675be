/**
 * `npm run bench:replicas` (issue #31, item 3): several `llmlb serve` processes on one Redis
 * against one router, live. Per policy, the same open-loop request stream (same seed) is sent to
 *  - 1 router,
 *  - 3 routers sharing their view through Redis (sharedView, a fresh key prefix per run),
 *  - 3 routers sharing their view and their pushes and answers (sharedView + sharedState: each
 *    applies the others' to its policy, src/state/shared-state.ts),
 *  - 3 routers on their own (no sharedView), for comparison,
 * the client spreading requests over the routers round-robin by request. The routers are real
 * processes (`node dist/cli.js serve`; `npm run build` first, else they run through tsx); the
 * engines are emulated in this process, each behind an HTTP hop that counts the requests it has
 * open at once (caps: maxConcurrency per backend).
 *
 * The workload shares prefixes: G system prompts of PREFIX tokens, each request one of them plus
 * its own question; the engines' prefix caches hold about two system prompts each, so where a
 * prompt goes decides whether its prefill is paid (hit rate from the engines' own counters).
 *
 * Prints per policy and setup: mean E2E, TTFT p90, prefix hit rate, errors, most in flight per
 * engine vs its cap, and the ratio to one router. Target (issue #31): 3 routers within 1.10×.
 * Knobs: REPLICAS_POLICIES (least-connections,estimated-wait,prefix-trie), REPLICAS_RATE (req/s,
 * 8), REPLICAS_SECONDS (12), REPLICAS_SEED (31) or REPLICAS_SEEDS (a list, e.g. 31,32,33: every
 * setup per seed in turn, then each setup's mean E2E and TTFT p90 over the seeds ÷ one router's, so
 * one misplaced group in one short run does not decide the figure), REPLICAS_REDIS (redis://127.0.0.1:6379/0),
 * REPLICAS_MODES (1,3-shared,3-state,3-own), REPLICAS_PARAMS (every policy's params, a YAML flow mapping).
 * Exit code 1 when a request failed or an engine was pushed past its cap in a shared-view run.
 */
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { createRng } from '../src/core/rng.js';
import { defaultProfile, startEngine, type EngineServer } from '../src/engine/server.js';
import { formatTable } from '../src/report/table.js';
import { dropPrefix } from './admission-run.js';
import {
  countingHop,
  routerYaml,
  spawnRouter,
  type CountedEngine,
  type RouterProc,
} from './replicas-fleet.js';

const POLICIES = (process.env.REPLICAS_POLICIES ?? 'least-connections,estimated-wait,prefix-trie')
  .split(',')
  .filter((s) => s !== '');
const MODES = (process.env.REPLICAS_MODES ?? '1,3-shared,3-state,3-own').split(',').filter((s) => s !== '');
const RATE = Number(process.env.REPLICAS_RATE ?? 8);
const SECONDS = Number(process.env.REPLICAS_SECONDS ?? 12);
const SEEDS = (process.env.REPLICAS_SEEDS ?? process.env.REPLICAS_SEED ?? '31')
  .split(',')
  .filter((x) => x !== '')
  .map(Number);
/** Parameters for every policy, a YAML flow mapping (e.g. `{ tieByCache: false }`); absent: defaults. */
const PARAMS = process.env.REPLICAS_PARAMS;
const REDIS = process.env.REPLICAS_REDIS ?? 'redis://127.0.0.1:6379/0';
const ENGINES = 4;
const CAP = 4;
const GROUPS = 8;
const PREFIX_TOKENS = 1200;
const MODEL = 'm1';
const TARGET = 1.1;

/** Engines whose prefill dominates a miss: a 1200-token prefix costs ~0.38 s, a hit almost nothing. */
const profile = () =>
  defaultProfile({
    slots: CAP,
    baseStepS: 0.012,
    perSeqS: 3.3e-5,
    perTokenS: 6e-7,
    prefillPerTokenS: 3.2e-4,
    kvCapacityTokens: 16384,
    blockSize: 16,
    // ~2.1 system prompts per engine: 8 across 4 engines fit only if each engine keeps its own.
    prefixCacheBlocks: 160,
  });

interface Req {
  at: number;
  group: number;
  text: string;
  outputTokens: number;
}

/** The stream: Poisson arrivals at RATE for SECONDS, group uniform, from `seed` (same every setup). */
function workload(seed: number): Req[] {
  const rng = createRng(seed);
  const words = (n: number, r: () => number): string =>
    Array.from({ length: n }, () => Math.floor(r() * 36 ** 4).toString(36)).join(' ');
  const prefixes = Array.from({ length: GROUPS }, (_, g) => {
    const r = createRng(seed * 1000 + g);
    return `System ${g}: ` + words(Math.ceil((PREFIX_TOKENS * 4) / 5), r);
  });
  const out: Req[] = [];
  let t = 0;
  for (let i = 0; ; i++) {
    t += -Math.log(1 - rng()) / RATE;
    if (t >= SECONDS) break;
    const group = Math.floor(rng() * GROUPS);
    out.push({
      at: t * 1000,
      group,
      text: `${prefixes[group]}\nQuestion ${i}: ${words(30, rng)}`,
      outputTokens: 16 + Math.floor(rng() * 33),
    });
  }
  return out;
}

interface Outcome {
  ok: boolean;
  e2eMs: number;
  ttftMs: number;
}

async function send(dispatcher: Agent, url: string, r: Req): Promise<Outcome> {
  const t0 = performance.now();
  try {
    const res = await request(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-llmlb-output-tokens': String(r.outputTokens) },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: r.text }], stream: true }),
      dispatcher,
    });
    let ttft = -1;
    let text = '';
    for await (const chunk of res.body) {
      if (ttft < 0) ttft = performance.now() - t0;
      text += (chunk as Buffer).toString();
    }
    const e2e = performance.now() - t0;
    return { ok: res.statusCode === 200 && text.includes('data: [DONE]'), e2eMs: e2e, ttftMs: ttft };
  } catch {
    return { ok: false, e2eMs: performance.now() - t0, ttftMs: -1 };
  }
}

interface Result {
  seed: number;
  policy: string;
  mode: string;
  n: number;
  failed: number;
  meanE2eMs: number;
  ttftP90Ms: number;
  hitRate: number;
  peaks: number[];
  /** sharedState: bytes each router published per second of the run, summed (0 otherwise). */
  stateBytesPerS: number;
}

/** A counter or gauge's value in a Prometheus text page (0 when absent). */
function metric(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

const p90 = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.ceil(0.9 * s.length) - 1)]!;
};

async function runOne(seed: number, policy: string, mode: string, reqs: readonly Req[]): Promise<Result> {
  const routersN = mode === '1' ? 1 : 3;
  const state = mode === '3-state';
  const shared = mode === '3-shared' || state;
  const prefix = `bench-replicas-${process.pid}-${Date.now()}-${policy}`;
  const engines: EngineServer[] = [];
  const hops: CountedEngine[] = [];
  const routers: RouterProc[] = [];
  const dispatcher = new Agent({ connections: 512, keepAliveTimeout: 30_000 });
  try {
    for (let i = 0; i < ENGINES; i++) {
      const e = await startEngine({
        port: 0,
        api: 'openai',
        models: [MODEL],
        profile: profile(),
        seed: i + 1,
        name: `e${i}`,
      });
      engines.push(e);
      hops.push(await countingHop(e.url));
    }
    const yaml = routerYaml({
      backends: hops.map((h, i) => ({ name: `e${i}`, url: h.url, cap: CAP })),
      policy: PARAMS ? `{ name: ${policy}, params: ${PARAMS} }` : policy,
      model: MODEL,
      // Shared state: rounds every 20 ms (a router's unused allowance goes back that fast).
      ...(shared ? { shared: { redis: REDIS, prefix, ...(state ? { intervalMs: 20 } : {}) } } : {}),
      ...(state ? { extra: 'sharedState: {}' } : {}),
    });
    routers.push(...(await Promise.all(Array.from({ length: routersN }, () => spawnRouter(yaml)))));
    // Probes in, shared-view rounds under way.
    await sleep(1500);
    const base = engines.map((e) => e.stats());
    for (const h of hops) h.resetPeak();
    const t0 = performance.now();
    const outs = await Promise.all(
      reqs.map(async (r, i) => {
        const wait = r.at - (performance.now() - t0);
        if (wait > 0) await sleep(wait);
        return send(dispatcher, routers[i % routers.length]!.url, r);
      }),
    );
    let q = 0;
    let h = 0;
    engines.forEach((e, i) => {
      const s = e.stats();
      q += s.prefixCacheQueries - base[i]!.prefixCacheQueries;
      h += s.prefixCacheHits - base[i]!.prefixCacheHits;
    });
    const runS = (performance.now() - t0) / 1000;
    let stateBytes = 0;
    if (state) {
      const sum = { lag: 0, lagMax: 0, batches: 0, waits: 0, waitMs: 0, handovers: 0 };
      for (const r of routers) {
        const res = await request(`${r.url}/metrics`, { dispatcher });
        const txt = await res.body.text();
        stateBytes += metric(txt, 'llmlb_shared_state_published_bytes');
        sum.lag += metric(txt, 'llmlb_shared_state_lag_ms_sum');
        sum.lagMax = Math.max(sum.lagMax, metric(txt, 'llmlb_shared_state_lag_ms_max'));
        sum.batches += metric(txt, 'llmlb_shared_state_received_batches');
        sum.waits += metric(txt, 'llmlb_shared_state_allowance_waits');
        sum.waitMs += metric(txt, 'llmlb_shared_state_allowance_wait_ms');
        sum.handovers += metric(txt, 'llmlb_shared_view_handovers');
      }
      process.stderr.write(
        `  shared state: lag mean ${(sum.lag / Math.max(1, sum.batches)).toFixed(1)} ms, max ${sum.lagMax.toFixed(0)} ms; ` +
          `${sum.waits} requests waited for allowance, mean ${(sum.waitMs / Math.max(1, sum.waits)).toFixed(1)} ms; ` +
          `${sum.handovers} slots handed over\n`,
      );
    }
    const ok = outs.filter((o) => o.ok);
    return {
      seed,
      policy,
      mode,
      n: outs.length,
      failed: outs.length - ok.length,
      meanE2eMs: ok.reduce((s, o) => s + o.e2eMs, 0) / Math.max(1, ok.length),
      ttftP90Ms: p90(ok.map((o) => o.ttftMs)),
      hitRate: q > 0 ? h / q : 0,
      peaks: hops.map((x) => x.peak),
      stateBytesPerS: stateBytes / runS,
    };
  } finally {
    await Promise.all(routers.map((r) => r.close()));
    await dispatcher.close();
    await Promise.all(hops.map((x) => x.close()));
    await Promise.all(engines.map((e) => e.close()));
    if (shared) await dropPrefix(REDIS, prefix).catch(() => undefined);
  }
}

const modeName = (m: string): string =>
  m === '1'
    ? '1 router'
    : m === '3-shared'
      ? '3 routers, shared view'
      : m === '3-state'
        ? '3 routers, shared state'
        : '3 routers, own view';

async function main(): Promise<void> {
  const t0 = Date.now();
  const load0 = loadavg()[0]!.toFixed(1);
  const results: Result[] = [];
  for (const seed of SEEDS) {
    const reqs = workload(seed);
    process.stderr.write(
      `${reqs.length} requests over ${SECONDS} s (${RATE}/s, seed ${seed}), ${GROUPS} shared prefixes of ${PREFIX_TOKENS} tokens, ` +
        `${ENGINES} engines capped at ${CAP}\n`,
    );
    for (const p of POLICIES)
      for (const m of MODES) {
        process.stderr.write(`${p} / ${modeName(m)} …\n`);
        results.push(await runOne(seed, p, m, reqs));
      }
  }
  const oneOf = (r: Result): Result | undefined =>
    results.find((x) => x.seed === r.seed && x.policy === r.policy && x.mode === '1');
  const rows = results.map((r) => {
    const one = oneOf(r);
    const ratio = one ? r.meanE2eMs / one.meanE2eMs : NaN;
    const ttftRatio = one ? r.ttftP90Ms / one.ttftP90Ms : NaN;
    const over = r.peaks.filter((p) => p > CAP).length;
    return [
      String(r.seed),
      r.policy,
      modeName(r.mode),
      String(r.n),
      String(r.failed),
      (r.meanE2eMs / 1000).toFixed(3),
      (r.ttftP90Ms / 1000).toFixed(3),
      `${(r.hitRate * 100).toFixed(1)} %`,
      `${r.peaks.join('/')} (cap ${CAP})${over > 0 ? ' OVER' : ''}`,
      r.mode === '1' ? '1.00×' : `${ratio.toFixed(2)}×`,
      r.mode === '1' ? '1.00×' : `${ttftRatio.toFixed(2)}×`,
      r.mode === '3-state' ? `${(r.stateBytesPerS / 1024).toFixed(1)}` : '',
    ];
  });
  const head = [
    'seed',
    'policy',
    'setup',
    'requests',
    'failed',
    'mean E2E s',
    'TTFT p90 s',
    'prefix hits',
    'most in flight per engine',
    'E2E vs 1',
    'TTFT p90 vs 1',
    'shared KB/s',
  ];
  console.log(formatTable(head, rows, { left: [1, 2, 8] }));
  // Over the seeds: each setup's mean E2E and TTFT p90 averaged over the seeds, ÷ one router's.
  const avg = (rs: readonly Result[], f: (r: Result) => number): number =>
    rs.reduce((s, r) => s + f(r), 0) / Math.max(1, rs.length);
  const ratioOf = (policy: string, mode: string): { e2e: number; ttft: number; hits: number } => {
    const these = results.filter((r) => r.policy === policy && r.mode === mode);
    const ones = results.filter((r) => r.policy === policy && r.mode === '1');
    return {
      e2e: avg(these, (r) => r.meanE2eMs) / avg(ones, (r) => r.meanE2eMs),
      ttft: avg(these, (r) => r.ttftP90Ms) / avg(ones, (r) => r.ttftP90Ms),
      hits: avg(these, (r) => r.hitRate),
    };
  };
  if (SEEDS.length > 1) {
    const sum = POLICIES.flatMap((p) =>
      MODES.map((m) => {
        const x = ratioOf(p, m);
        return [
          p,
          modeName(m),
          String(SEEDS.length),
          `${x.e2e.toFixed(2)}×`,
          `${x.ttft.toFixed(2)}×`,
          `${(x.hits * 100).toFixed(1)} %`,
        ];
      }),
    );
    console.log(
      "\nOver the seeds (mean of each figure over the seeds ÷ one router's):\n" +
        formatTable(['policy', 'setup', 'seeds', 'E2E vs 1', 'TTFT p90 vs 1', 'prefix hits'], sum, {
          left: [0, 1],
        }),
    );
  }
  const worstOf = (m: string): number =>
    Math.max(...POLICIES.filter(() => MODES.includes(m)).map((p) => ratioOf(p, m).e2e));
  const worstState = worstOf('3-state');
  const worst = worstOf('3-shared');
  const shared = results.filter((r) => r.mode === '3-shared' || r.mode === '3-state');
  const failed = results.reduce((s, r) => s + r.failed, 0);
  const overCap = shared.filter((r) => r.peaks.some((p) => p > CAP)).length;
  console.log(
    `\n${results.length} runs in ${((Date.now() - t0) / 1000).toFixed(0)} s (load ${load0} → ${loadavg()[0]!.toFixed(1)}); ` +
      `worst 3-routers-shared-view / 1-router mean E2E ${Number.isFinite(worst) ? worst.toFixed(2) : 'n/a'}×; ` +
      `worst 3-routers-shared-state / 1-router ${Number.isFinite(worstState) ? worstState.toFixed(2) : 'n/a'}× ` +
      `(over ${SEEDS.length} seed${SEEDS.length > 1 ? 's' : ''}; target ≤ ${TARGET.toFixed(2)}×: ` +
      `${worstState <= TARGET ? 'met' : 'NOT met'}); ${failed} failed requests; ${overCap} shared-view runs over a cap`,
  );
  process.exit(failed > 0 || overCap > 0 ? 1 : 0);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
