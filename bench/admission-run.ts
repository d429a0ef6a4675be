/**
 * Drives the admission API of several router replicas at once; shared by the replicas test
 * (test/admission-replicas.test.ts) and `npm run bench:admission`.
 *
 * The replicas are in-process `Router`s, each with its own QuotaStore: in-memory (one replica:
 * nothing to share) or Redis (every replica its own connection, one key prefix). They share
 * nothing else, so any over-admission across them would come from the store.
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { Agent, request } from 'undici';
import type { QuotaLimitsEntry } from '../src/config/schema.js';
import { fastProfile } from '../test/helpers.js';
import { startEngine, type EngineServer } from '../src/engine/server.js';
import { silentLogger } from '../src/log.js';
import { Router, type RouterSettings } from '../src/proxy/router.js';

/** Each model is bound by a different limit, so every cap is exercised by one burst. */
export const CAPS: Record<string, QuotaLimitsEntry> = {
  conc: { weight: 1, maxConcurrent: 20, tokensPerMinute: 1_000_000, requestsPerMinute: 100_000 },
  rpm: { weight: 2, maxConcurrent: 100_000, tokensPerMinute: 1_000_000, requestsPerMinute: 30 },
  tpm: { weight: 1, maxConcurrent: 100_000, tokensPerMinute: 5_000, requestsPerMinute: 100_000 },
};

export interface Replicas {
  urls: string[];
  routers: Router[];
  close(): Promise<void>;
}

function replicaSettings(
  engineUrl: string,
  redis: { url: string; prefix: string } | undefined,
): RouterSettings {
  return {
    server: { host: '127.0.0.1', port: 0, maxBodyBytes: 1 << 20 },
    backends: [
      { name: 'e', url: engineUrl, api: 'ollama', models: ['m'], maxConcurrency: Infinity, weight: 1 },
    ],
    policy: { name: 'least-connections', params: {} },
    retry: { attempts: 1, backoffMs: 5 },
    timeouts: { connectMs: 1000, firstByteMs: 10_000, idleMs: 10_000 },
    health: { failuresToEject: 3, probeIntervalMs: 5000, probeTimeoutMs: 500, scrapeIntervalMs: 5000 },
    discovery: { refreshMs: 60_000 },
    queue: { maxLength: 1000, maxWaitMs: 30_000 },
    log: { level: 'silent', prompts: false },
    quotas: { models: CAPS },
    admission: { leaseTtlMs: 60_000, reclaimIntervalMs: 1000, tickMs: 100 },
    ...(redis ? { state: { redis: redis.url, keyPrefix: redis.prefix } } : {}),
  };
}

/** Start `n` replicas (and one emulated engine as their nominal backend). */
export async function startReplicas(n: number, redis?: { url: string; prefix: string }): Promise<Replicas> {
  const engine: EngineServer = await startEngine({
    port: 0,
    api: 'ollama',
    models: ['m'],
    profile: fastProfile(),
  });
  const routers: Router[] = [];
  const urls: string[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const r = new Router(replicaSettings(engine.url, redis), silentLogger());
      routers.push(r);
      urls.push(await r.listen('127.0.0.1', 0));
    }
  } catch (err) {
    await Promise.all(routers.map((r) => r.close().catch(() => undefined)));
    await engine.close();
    throw err;
  }
  return {
    urls,
    routers,
    async close() {
      await Promise.all(routers.map((r) => r.close()));
      await engine.close();
    },
  };
}

export interface Call {
  replica: number;
  model: string | undefined;
  tokens: number;
  /** The model admitted to, or null when told to wait. */
  admitted: string | null;
  taskId: string | null;
  waitForMs: number | null;
  latencyMs: number;
}

/** Call i: pinned to conc / rpm / tpm or unpinned in turn, sizes 50–399 tokens, replica i mod n. */
export function plan(i: number): { model: string | undefined; tokens: number } {
  const model = ['conc', 'rpm', 'tpm', undefined][i % 4];
  return { model, tokens: 50 + ((i * 37) % 350) };
}

/** `count` /schedule calls all in flight at once, spread over the replicas. */
export async function burst(urls: string[], count: number): Promise<Call[]> {
  const dispatcher = new Agent({ connections: 256, pipelining: 1 });
  try {
    return await Promise.all(
      Array.from({ length: count }, async (_, i): Promise<Call> => {
        const { model, tokens } = plan(i);
        const replica = i % urls.length;
        const t0 = performance.now();
        const res = await request(`${urls[replica]}/schedule`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(model ? { estimated_tokens: tokens, model } : { estimated_tokens: tokens }),
          dispatcher,
        });
        const body = (await res.body.json()) as {
          model_backend_id?: string;
          task_id?: string;
          wait_for_ms?: number;
        };
        const latencyMs = performance.now() - t0;
        if (res.statusCode !== 200)
          throw new Error(`/schedule answered ${res.statusCode}: ${JSON.stringify(body)}`);
        return {
          replica,
          model,
          tokens,
          admitted: body.model_backend_id ?? null,
          taskId: body.task_id ?? null,
          waitForMs: body.wait_for_ms ?? null,
          latencyMs,
        };
      }),
    );
  } finally {
    await dispatcher.close();
  }
}

export interface ModelTally {
  model: string;
  admitted: number;
  tokens: number;
  maxConcurrent: number;
  requestsPerMinute: number;
  tokensPerMinute: number;
}

/**
 * Per model: what was admitted in the burst against each cap. The burst lasts far less than a
 * minute and nothing completes, so every admission counts against all three caps at once.
 */
export function tally(calls: readonly Call[]): {
  models: ModelTally[];
  admitted: number;
  waited: number;
  violations: string[];
} {
  const models: ModelTally[] = Object.entries(CAPS).map(([model, c]) => {
    const mine = calls.filter((x) => x.admitted === model);
    return {
      model,
      admitted: mine.length,
      tokens: mine.reduce((a, x) => a + x.tokens, 0),
      maxConcurrent: c.maxConcurrent,
      requestsPerMinute: c.requestsPerMinute,
      tokensPerMinute: c.tokensPerMinute,
    };
  });
  const violations: string[] = [];
  for (const m of models) {
    if (m.admitted > m.maxConcurrent)
      violations.push(`${m.model}: ${m.admitted} in flight > maxConcurrent ${m.maxConcurrent}`);
    if (m.admitted > m.requestsPerMinute)
      violations.push(`${m.model}: ${m.admitted} requests > requestsPerMinute ${m.requestsPerMinute}`);
    if (m.tokens > m.tokensPerMinute)
      violations.push(`${m.model}: ${m.tokens} tokens > tokensPerMinute ${m.tokensPerMinute}`);
  }
  const admitted = calls.filter((x) => x.admitted !== null).length;
  return { models, admitted, waited: calls.length - admitted, violations };
}

/** Delete every key under `prefix` (test and bench runs clean up after themselves). */
export async function dropPrefix(url: string, prefix: string): Promise<void> {
  const r = new Redis(url, { lazyConnect: true });
  await r.connect();
  try {
    const keys = await r.keys(`${prefix.replace(/[*?[\]]/g, '\\$&')}*`);
    if (keys.length > 0) await r.del(...keys);
  } finally {
    await r.quit();
  }
}
