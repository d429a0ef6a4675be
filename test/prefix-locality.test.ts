import { after, before, describe, test } from 'node:test';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import assert from 'node:assert/strict';
import type { EngineServer } from '../src/engine/server.js';
import type { Router } from '../src/proxy/router.js';
import { parseConfig, type ParseOptions } from '../src/config/load.js';
import { configSchema, normalize } from '../src/config/schema.js';
import { configIssues } from '../src/config/testing.js';
import { createPolicy, policyNames } from '../src/core/policies/index.js';
import { backend, engine, fastProfile, post, router, settings, waitFor } from './helpers.js';

const chat = (content: string, extra: Record<string, unknown> = {}) => ({
  model: 'm1',
  messages: [{ role: 'user', content }],
  max_tokens: 2,
  ...extra,
});

/** Three emulated OpenAI-API engines behind a router built from config-file keys, as `llmlb serve` would. */
async function openAiFleet(
  profile: ReturnType<typeof fastProfile>,
  config: Record<string, unknown>,
): Promise<{ engines: EngineServer[]; router: Router; url: string }> {
  const engines = await Promise.all([0, 1, 2].map(() => engine({ profile })));
  const cfg = normalize(
    configSchema.parse({
      backends: engines.map((e, i) => ({ name: `e${i}`, url: e.url, api: 'openai', models: ['m1'] })),
      log: { level: 'silent' },
      ...config,
    }),
  );
  const started = await router(
    settings(
      cfg.backends.map((b) => backend(b.name, b.url, { api: 'openai' })),
      cfg,
    ),
  );
  return { engines, ...started };
}

/**
 * SkyLB's policies on the live router, against emulated engines over real HTTP: selective
 * pushing on pending requests makes the fleet scrape /metrics at the policy's probe interval, and
 * consistent hashing follows the configured session key.
 */
describe('prefix locality and selective pushing on the live router', () => {
  let engines: EngineServer[];
  let r: Router;
  let url: string;

  before(async () => {
    ({
      engines,
      router: r,
      url,
    } = await openAiFleet(fastProfile({ slots: 2 }), {
      policy: { name: 'consistent-hash', push: 'sp-p', probeIntervalMs: 20 },
      // Far slower than the policy asks: the policy's interval must win.
      health: { scrapeIntervalMs: 60_000, probeIntervalMs: 60_000 },
      sessionKey: { header: 'X-Conversation', bodyField: 'metadata.session_id' },
    }));
  });

  after(async () => {
    await r.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('SP-P: the fleet scrapes engine metrics at the policy’s probe interval', async () => {
    const seen = new Set<number>();
    // With the configured 60 s scrape interval this could never see five scrapes.
    await waitFor(
      () => {
        const at = r.scheduler.backend('e0')?.metrics?.at;
        if (at !== undefined) seen.add(at);
        return seen.size >= 5;
      },
      5000,
      'five scrapes',
    );
  });

  test('a burst is held in the router queue and pushed as engines report room; all complete', async () => {
    const res = await Promise.all(
      Array.from({ length: 12 }, (_, i) => post(`${url}/v1/chat/completions`, chat(`burst ${i}`))),
    );
    for (const x of res) assert.equal(x.status, 200, await x.text());
    await waitFor(() => r.scheduler.inFlightTotal === 0 && r.scheduler.queueLength === 0, 5000, 'drained');
  });

  test('the configured header and body field are the consistent-hash key', async () => {
    const homeOf = async (init: { headers?: Record<string, string>; extra?: Record<string, unknown> }) => {
      const names = new Set<string>();
      for (let i = 0; i < 4; i++) {
        const res = await post(`${url}/v1/chat/completions`, chat(`turn ${i}`, init.extra), init.headers);
        assert.equal(res.status, 200);
        await res.text();
        names.add(res.headers.get('x-llmlb-backend')!);
      }
      return names;
    };
    for (let u = 0; u < 3; u++) {
      assert.equal((await homeOf({ headers: { 'x-conversation': `conv-${u}` } })).size, 1);
      assert.equal((await homeOf({ extra: { metadata: { session_id: `s-${u}` } } })).size, 1);
    }
    // Different keys reach more than one backend.
    const homes = new Set<string>();
    for (let u = 0; u < 12; u++) {
      const res = await post(`${url}/v1/chat/completions`, chat('k'), { 'x-conversation': `user-${u}` });
      await res.text();
      homes.add(res.headers.get('x-llmlb-backend')!);
    }
    assert.ok(homes.size >= 2, `homes: ${[...homes].join(',')}`);
  });
});

test('sessionKey config: defaults, validation', () => {
  const base = { backends: [{ name: 'a', url: 'http://127.0.0.1:1' }] };
  assert.equal(normalize(configSchema.parse(base)).sessionKey, undefined);
  const d = normalize(configSchema.parse({ ...base, sessionKey: {} })).sessionKey!;
  assert.deepEqual(d, { header: 'x-session-token', bodyPath: ['user'] });
  assert.equal(configSchema.safeParse({ ...base, sessionKey: { header: 'bad header' } }).success, false);
  assert.equal(configSchema.safeParse({ ...base, sessionKey: { bodyField: 'a..b' } }).success, false);
  assert.equal(configSchema.safeParse({ ...base, sessionKey: { field: 'x' } }).success, false);
});

describe('sglang-cache-aware on the live router', () => {
  let engines: EngineServer[];
  let r: Router;
  let url: string;

  before(async () => {
    ({
      engines,
      router: r,
      url,
    } = await openAiFleet(fastProfile(), {
      policy: { name: 'sglang-cache-aware', chunkChars: 16 },
    }));
  });

  after(async () => {
    await r.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  const send = async (content: string): Promise<string> => {
    const res = await post(`${url}/v1/chat/completions`, chat(content));
    assert.equal(res.status, 200, await res.text());
    return res.headers.get('x-llmlb-backend')!;
  };

  test('follow-ups stay with their conversation; new prompts go to the backend holding least', async () => {
    const history = 'a long conversation history that the next turn resends in full. '.repeat(4);
    const first = await send(history);
    for (let turn = 0; turn < 3; turn++) assert.equal(await send(`${history} turn ${turn}`), first);
    // Unrelated prompts: each goes to a backend that has been sent less, so all three get one.
    const others = new Set<string>();
    for (let u = 0; u < 2; u++) others.add(await send(`user ${u}: ${'another topic entirely '.repeat(4)}`));
    assert.equal(others.has(first), false, 'the busiest tree is not the smallest');
    assert.equal(others.size, 2);
    await waitFor(() => r.scheduler.inFlightTotal === 0, 5000, 'drained');
  });
});

test('sglang-cache-aware in a config file: loads with its push mode; bad parameters are reported on `policy`', () => {
  const opts: ParseOptions = {
    knownPolicies: policyNames(),
    validatePolicy: (spec, scheduling) => void createPolicy(spec, () => 0.5, scheduling),
    source: 't.yaml',
  };
  const minimal = 'backends:\n  - name: a\n    url: http://127.0.0.1:11434\n';
  const c = parseConfig(
    `${minimal}policy: { name: sglang-cache-aware, push: sp-p, cacheThreshold: 0.3 }\n`,
    opts,
  );
  assert.deepEqual(c.policy, { name: 'sglang-cache-aware', params: { push: 'sp-p', cacheThreshold: 0.3 } });
  const bad = configIssues(`${minimal}policy: { name: sglang-cache-aware, cacheThreshold: 3 }\n`, opts);
  assert.deepEqual([bad[0]?.path, bad[0]?.line], ['policy', 4]);
  assert.match(bad[0]!.message, /sglang-cache-aware.*cacheThreshold/);
});

test('SP-P on an Ollama backend: /metrics at the probe interval, /api/ps (loaded models) only at the scrape interval', async () => {
  // An Ollama-API backend with vLLM-style metrics, counting what the router asks for.
  const hits = new Map<string, number>();
  const server = createServer((req, res) => {
    const path = req.url ?? '';
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const json = (body: unknown): void => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (path === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:gpu_cache_usage_perc 0.1\n');
    } else if (path === '/api/ps') json({ models: [{ name: 'm1', model: 'm1' }] });
    else if (path === '/api/tags') json({ models: [{ name: 'm1', model: 'm1' }] });
    else if (path === '/api/version') json({ version: '0.0.1' });
    else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const { router: r } = await router(
    settings([backend('o', `http://127.0.0.1:${port}`)], {
      policy: { name: 'prefix-trie', params: { push: 'sp-p', probeIntervalMs: 20 } },
      health: { failuresToEject: 3, probeIntervalMs: 60_000, probeTimeoutMs: 500, scrapeIntervalMs: 60_000 },
    }),
  );
  try {
    await waitFor(() => (hits.get('/metrics') ?? 0) >= 10, 5000, 'ten /metrics scrapes');
    assert.equal(hits.get('/api/ps'), 1, 'read once, not with every metrics probe');
  } finally {
    await r.close();
    await new Promise((resolve) => server.close(resolve));
  }
});
