import { performance } from 'node:perf_hooks';
import { monitorLoopDelay, type LoopDelay } from './loop-delay.js';
import { deriveSeed } from '../core/rng.js';
import type { PolicySpec } from '../core/policies/index.js';
import { WorkloadParams } from '../core/policies/shared/workload-tracker.js';
import { startEngine, type EngineServer } from '../engine/server.js';
import { silentLogger } from '../log.js';
import { Router, type RouterSettings } from '../proxy/router.js';
import type { OutstandingSample } from '../report/results.js';
import type { Scenario } from '../scenario/types.js';
import { replay, type ClientRecord } from './replay.js';

export interface LiveRun {
  readonly policy: string;
  readonly records: readonly ClientRecord[];
  /** Per engine: prefix-cache blocks looked up and hit, as the engine counted them. */
  readonly engines: readonly { name: string; prefixQueries: number; prefixHits: number; requests: number }[];
  /**
   * Each engine's outstanding requests (running + waiting, as it reports them) sampled at a fixed
   * period, in model seconds from the start of the replay: the live twin of the simulator's samples.
   */
  readonly samples: readonly OutstandingSample[];
  /** Requests held in the router's own queue, sampled with `samples`. */
  readonly routerSamples: readonly { t: number; queued: number }[];
  readonly wallS: number;
  /**
   * Event-loop delay of this process during the replay, ms: client, router and engines share it,
   * so a late timer delays arrivals, engine steps and forwarding alike (a loaded machine shows
   * here first).
   */
  readonly loopDelayMs: LoopDelay;
}

/**
 * A built-in SP-P policy probes engine metrics every `probeIntervalMs` of real time. The engines
 * run `timeScale`× faster than model time, so a live run would see pending counts `timeScale`×
 * staler, in model time, than the simulator (which probes every probeIntervalMs of model time) or a
 * real deployment. Unless the scenario sets it, the probe interval (the filter's default, 50 ms) is
 * divided by the time scale.
 */
export function scaledPushParams(policy: PolicySpec, timeScale: number): PolicySpec['params'] {
  const params = policy.params ?? {};
  if (params.push !== 'sp-p' || params.probeIntervalMs !== undefined || !(timeScale > 1)) return params;
  return { ...params, probeIntervalMs: Math.max(1, Math.round(50 / timeScale)) };
}

/** Built-in policies whose WorkloadTracker takes times in seconds of the host's clock. */
const TRACKING_POLICIES: ReadonlySet<string> = new Set([
  'jsq',
  'max-capacity',
  'min-min',
  'workload-aware',
  'rl',
]);
const TRACKER_TIMES = ['heavyPromptS', 'heavyDecodeS', 'priorPrefillS', 'priorDecodeS'] as const;

/**
 * A workload-tracking policy's parameters for a run `timeScale`× faster than model time. Its
 * tracker learns each backend's speed on the host clock (real seconds, here model seconds ÷ K)
 * and compares it with thresholds and priors given in model seconds: the heavy-prompt/decode
 * thresholds (request classes) and the speeds assumed before a backend reports one (the prefill
 * prior is never replaced when the API reports no prefill time, as OpenAI's does not). Live they
 * are divided by K, so the router holds and classes requests as the simulator does.
 */
export function scaledTrackerParams(policy: PolicySpec, timeScale: number): PolicySpec['params'] {
  const params = policy.params ?? {};
  if (!TRACKING_POLICIES.has(policy.name) || !(timeScale > 1)) return params;
  const defaults = WorkloadParams.parse({});
  const out: Record<string, unknown> = { ...params };
  for (const k of TRACKER_TIMES) {
    const v = params[k];
    // Anything but a number is left for the policy's own validation to report.
    if (v === undefined || typeof v === 'number') out[k] = (v ?? defaults[k]) / timeScale;
  }
  return out;
}

/** Router settings for a bench run: the scenario's fleet, one policy, timeouts sized for long queues. */
export function benchSettings(
  scenario: Scenario,
  engines: readonly EngineServer[],
  policy: PolicySpec,
  timeScale = 1,
): RouterSettings {
  return {
    server: { host: '127.0.0.1', port: 0, maxBodyBytes: 64 << 20 },
    backends: scenario.fleet.map((b, i) => ({
      name: b.name,
      url: engines[i]!.url,
      api: 'ollama' as const,
      models: b.models,
      maxConcurrency: b.maxConcurrency,
      weight: b.weight,
      region: b.region,
    })),
    policy: {
      name: policy.name,
      params:
        scaledTrackerParams({ ...policy, params: scaledPushParams(policy, timeScale) }, timeScale) ?? {},
    },
    scheduling: scenario.scheduling,
    retry: { attempts: 4, backoffMs: 25 },
    // A bench queues everything the scenario sends: nothing may time out in the router.
    timeouts: { connectMs: 5000, firstByteMs: 24 * 3600_000, idleMs: 24 * 3600_000 },
    health: { failuresToEject: 1000, probeIntervalMs: 1000, probeTimeoutMs: 5000, scrapeIntervalMs: 50 },
    discovery: { refreshMs: 60_000 },
    queue: { maxLength: 1_000_000, maxWaitMs: 24 * 3600_000 },
    log: { level: 'silent', prompts: false },
  };
}

/**
 * One live run: fresh emulated engines with the scenario's profiles (time-scaled), a fresh
 * router with the policy, the scenario's workload replayed over HTTP.
 */
export async function runLive(
  scenario: Scenario,
  policy: PolicySpec,
  opts: { seed: number; timeScale: number; onProgress?: (done: number, sent: number) => void },
): Promise<LiveRun> {
  const engines: EngineServer[] = [];
  const samples: OutstandingSample[] = [];
  const routerSamples: { t: number; queued: number }[] = [];
  let sampler: NodeJS.Timeout | undefined;
  let router: Router | undefined;
  const started = Date.now();
  let loop: ReturnType<typeof monitorLoopDelay> | undefined;
  try {
    for (const b of scenario.fleet) {
      engines.push(
        await startEngine({
          port: 0,
          api: 'both',
          models: b.models,
          profile: b.profile,
          timeScale: opts.timeScale,
          seed: deriveSeed(opts.seed, b.name),
          name: b.name,
        }),
      );
    }
    router = new Router(benchSettings(scenario, engines, policy, opts.timeScale), silentLogger());
    const url = await router.listen('127.0.0.1', 0);
    // The simulator's sampling period (run length / 400), in real time, at least 50 ms.
    const periodMs = Math.max(50, (((scenario.durationS + scenario.graceS) / 400) * 1000) / opts.timeScale);
    const t0 = performance.now();
    loop = monitorLoopDelay();
    const running = engines;
    const live = router;
    sampler = setInterval(() => {
      const t = ((performance.now() - t0) / 1000) * opts.timeScale;
      routerSamples.push({ t, queued: live.scheduler.queueLength });
      running.forEach((e, i) => {
        const s = e.stats();
        samples.push({
          t,
          backend: scenario.fleet[i]!.name,
          outstanding: s.running + s.waiting,
          engineWaiting: s.waiting,
        });
      });
    }, periodMs);
    const records = await replay(scenario.createDriver(opts.seed), {
      baseUrl: url,
      timeScale: opts.timeScale,
      durationS: scenario.durationS,
      graceS: scenario.graceS,
      ...(opts.onProgress ? { onProgress: opts.onProgress } : {}),
    });
    clearInterval(sampler);
    loop.stop();
    return {
      policy: policy.name,
      records,
      engines: engines.map((e, i) => {
        const s = e.stats();
        return {
          name: scenario.fleet[i]!.name,
          prefixQueries: s.prefixCacheQueries,
          prefixHits: s.prefixCacheHits,
          requests: s.requests,
        };
      }),
      samples,
      routerSamples,
      wallS: (Date.now() - started) / 1000,
      loopDelayMs: loop.read(),
    };
  } finally {
    loop?.stop();
    clearInterval(sampler);
    await router?.close();
    await Promise.all(engines.map((e) => e.close()));
  }
}
