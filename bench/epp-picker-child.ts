/**
 * `llmlb epp` alone in its process for bench/epp.ts: the router core as serve builds it, over
 * BENCH_EPP_BACKENDS emulated engines (they answer its probes; the bench's gateway answers the
 * requests itself), with the picker's own decision latency and CPU time measured here.
 * Messages from the parent: 'mark' (start measuring), 'report' (send the figures back).
 */
import { PerformanceObserver } from 'node:perf_hooks';
import { defaultProfile, startEngine } from '../src/engine/server.js';
import { silentLogger } from '../src/log.js';
import { Router, type RouterSettings } from '../src/proxy/router.js';
import { EppServer } from '../src/epp/server.js';
import { envInt, exitWithParent, sendReady } from './common.js';

export interface PickerReport {
  readonly type: 'report';
  /** Decisions made at once (not held in the router queue): their latency, ms (server side). */
  readonly decisions: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /** Decisions the policy held in the router queue first, and their p50 / p99 wait + pick, ms. */
  readonly held: number;
  readonly heldP50: number;
  readonly heldP99: number;
  readonly cpuUsPerRequest: number;
  readonly open: number;
  readonly inFlight: number;
  readonly queued: number;
  readonly policy: string;
  /** Garbage collections during the measured run: count, total and longest pause, ms. */
  readonly gcCount: number;
  readonly gcTotalMs: number;
  readonly gcMaxMs: number;
  /** Major (mark-sweep) collections among them, and the heap in use after the run, MB. */
  readonly gcMajor: number;
  readonly heapMb: number;
}

const BACKENDS = envInt('BENCH_EPP_BACKENDS', 8, 1);
const POLICY = process.env.BENCH_EPP_POLICY ?? 'estimated-wait';

async function main(): Promise<void> {
  const engines = await Promise.all(
    Array.from({ length: BACKENDS }, (_, i) =>
      startEngine({
        port: 0,
        api: 'openai',
        models: ['m1'],
        name: `e${i}`,
        profile: defaultProfile({ slots: 64 }),
        timeScale: 1,
        seed: i + 1,
      }),
    ),
  );
  const settings: RouterSettings = {
    server: { host: '127.0.0.1', port: 0, maxBodyBytes: 10 << 20 },
    backends: engines.map((e, i) => ({
      name: `b${i}`,
      url: e.url,
      api: 'openai',
      models: ['m1'],
      maxConcurrency: Infinity,
      weight: 1,
    })),
    policy: { name: POLICY, params: {} },
    retry: { attempts: 1, backoffMs: 5 },
    timeouts: { connectMs: 1000, firstByteMs: 60_000, idleMs: 60_000 },
    health: { failuresToEject: 3, probeIntervalMs: 1000, probeTimeoutMs: 1000, scrapeIntervalMs: 1000 },
    discovery: { refreshMs: 10_000 },
    queue: { maxLength: 100_000, maxWaitMs: 60_000 },
    log: { level: 'silent', prompts: false },
  };
  const router = new Router(settings, silentLogger());
  await router.listen('127.0.0.1', 0);
  let samples: number[] = [];
  let heldSamples: number[] = [];
  const epp = new EppServer(router, {
    host: '127.0.0.1',
    port: 0,
    healthPort: 0,
    fallbacks: 2,
    onDecision: (ms, held) => (held ? heldSamples : samples).push(ms),
  });
  await epp.listen();
  let cpu = process.cpuUsage();
  let gc = { count: 0, total: 0, max: 0, major: 0 };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gc.count++;
      gc.total += e.duration;
      gc.max = Math.max(gc.max, e.duration);
      // NODE_PERFORMANCE_GC_MAJOR = 4
      if ((e as { detail?: { kind?: number } }).detail?.kind === 4) gc.major++;
    }
  }).observe({ entryTypes: ['gc'] });
  process.on('message', (m: unknown) => {
    if (m === 'mark') {
      samples = [];
      heldSamples = [];
      gc = { count: 0, total: 0, max: 0, major: 0 };
      cpu = process.cpuUsage();
    } else if (m === 'report') {
      const used = process.cpuUsage(cpu);
      const s = samples.slice().sort((a, b) => a - b);
      const hs = heldSamples.slice().sort((a, b) => a - b);
      const at = (xs: number[], p: number): number =>
        xs[Math.min(xs.length - 1, Math.floor(p * xs.length))] ?? NaN;
      const q = (p: number): number => at(s, p);
      const views = router.scheduler.backendViews();
      const report: PickerReport = {
        type: 'report',
        decisions: s.length,
        p50: q(0.5),
        p99: q(0.99),
        max: s[s.length - 1] ?? NaN,
        held: hs.length,
        heldP50: at(hs, 0.5),
        heldP99: at(hs, 0.99),
        cpuUsPerRequest: (used.user + used.system) / Math.max(1, s.length + hs.length),
        open: epp.ctx.open,
        inFlight: views.reduce((n, b) => n + b.inFlight, 0),
        queued: router.scheduler.queueLength,
        policy: router.scheduler.policyName,
        gcCount: gc.count,
        gcTotalMs: gc.total,
        gcMaxMs: gc.max,
        gcMajor: gc.major,
        heapMb: process.memoryUsage().heapUsed / 2 ** 20,
      };
      process.send?.(report);
    }
  });
  exitWithParent(async () => {
    await epp.close();
    await router.close();
    await Promise.all(engines.map((e) => e.close()));
  });
  sendReady([`127.0.0.1:${epp.port}`]);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
