import { deriveSeed } from '../core/rng.js';
import type { PolicySpec } from '../core/policies/index.js';
import { startEngine, type EngineServer } from '../engine/server.js';
import { silentLogger } from '../log.js';
import { Router, type RouterSettings } from '../proxy/router.js';
import type { Scenario } from '../scenario/types.js';
import { replay, type ClientRecord } from './replay.js';

export interface LiveRun {
  readonly policy: string;
  readonly records: readonly ClientRecord[];
  /** Per engine: prefix-cache blocks looked up and hit, as the engine counted them. */
  readonly engines: readonly { name: string; prefixQueries: number; prefixHits: number; requests: number }[];
  readonly wallS: number;
}

/** Router settings for a bench run: the scenario's fleet, one policy, timeouts sized for long queues. */
export function benchSettings(
  scenario: Scenario,
  engines: readonly EngineServer[],
  policy: PolicySpec,
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
    policy: { name: policy.name, params: policy.params ?? {} },
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
  let router: Router | undefined;
  const started = Date.now();
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
    router = new Router(benchSettings(scenario, engines, policy), silentLogger());
    const url = await router.listen('127.0.0.1', 0);
    const records = await replay(scenario.createDriver(opts.seed), {
      baseUrl: url,
      timeScale: opts.timeScale,
      durationS: scenario.durationS,
      graceS: scenario.graceS,
      ...(opts.onProgress ? { onProgress: opts.onProgress } : {}),
    });
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
      wallS: (Date.now() - started) / 1000,
    };
  } finally {
    await router?.close();
    await Promise.all(engines.map((e) => e.close()));
  }
}
