import {
  defaultProfile,
  startEngine,
  type EngineServer,
  type EngineServerOptions,
} from '../src/engine/server.js';
import { silentLogger } from '../src/log.js';
import { Router, type RouterSettings } from '../src/proxy/router.js';
import type { BackendConfig } from '../src/fleet/fleet.js';

/** A fast engine profile so integration tests take milliseconds per request. */
export function fastProfile(over: Partial<Parameters<typeof defaultProfile>[0]> = {}) {
  return defaultProfile({
    slots: 4,
    baseStepS: 0.002,
    perSeqS: 0,
    perTokenS: 0,
    prefillPerTokenS: 0,
    ...over,
  });
}

export async function engine(opts: Partial<EngineServerOptions> = {}): Promise<EngineServer> {
  return startEngine({
    port: 0,
    api: 'both',
    models: ['m1'],
    profile: fastProfile(),
    timeScale: 1,
    seed: 1,
    ...opts,
  });
}

export function settings(backends: BackendConfig[], over: Partial<RouterSettings> = {}): RouterSettings {
  return {
    server: { host: '127.0.0.1', port: 0, maxBodyBytes: 1 << 20 },
    backends,
    policy: { name: 'least-connections', params: {} },
    retry: { attempts: 4, backoffMs: 5 },
    timeouts: { connectMs: 1000, firstByteMs: 10_000, idleMs: 10_000 },
    health: { failuresToEject: 3, probeIntervalMs: 100, probeTimeoutMs: 500, scrapeIntervalMs: 100 },
    discovery: { refreshMs: 1000 },
    queue: { maxLength: 1000, maxWaitMs: 30_000 },
    log: { level: 'silent', prompts: false },
    ...over,
  };
}

export function backend(name: string, url: string, over: Partial<BackendConfig> = {}): BackendConfig {
  return { name, url, api: 'ollama', models: ['m1'], maxConcurrency: Infinity, weight: 1, ...over };
}

export async function router(s: RouterSettings): Promise<{ router: Router; url: string }> {
  const r = new Router(s, silentLogger());
  const url = await r.listen('127.0.0.1', 0);
  return { router: r, url };
}

export async function waitFor(cond: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** Health settings for stall tests: fast probes and scrapes, the stall limit `stallMinMs` (factor 10). */
export function stallHealth(
  stallMinMs: number,
  over: Partial<RouterSettings['health']> = {},
): RouterSettings['health'] {
  return {
    failuresToEject: 3,
    probeIntervalMs: 100,
    probeTimeoutMs: 500,
    scrapeIntervalMs: 100,
    stallMinMs,
    stallFactor: 10,
    ...over,
  };
}

/**
 * Two engines behind a round-robin router: `hung` never answers a generation (its probe does),
 * `good` does. Stall limit 1.5 s, a 60 s quarantine, and first-byte/idle timeouts of 600 s, so
 * only the stall watch can find the hung one.
 */
export async function hungFleet(): Promise<{ router: Router; url: string; close(): Promise<void> }> {
  const hung = await engine({ faults: { hang: true } });
  const good = await engine();
  const { router: r, url } = await router(
    settings([backend('hung', hung.url), backend('good', good.url)], {
      policy: { name: 'round-robin', params: {} },
      timeouts: { connectMs: 1000, firstByteMs: 600_000, idleMs: 600_000 },
      health: stallHealth(1500, { quarantineMs: 60_000 }),
    }),
  );
  return {
    router: r,
    url,
    close: async () => {
      await r.close();
      await Promise.all([hung.close(), good.close()]);
    },
  };
}
