import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { credentials } from '@grpc/grpc-js';
import { defaultProfile, startEngine, type EngineServer } from '../engine/server.js';
import { silentLogger } from '../log.js';
import { Router, type RouterSettings } from '../proxy/router.js';
import type { BackendConfig } from '../fleet/fleet.js';
import { FakeEnvoy } from './envoy.testing.js';
import { eppProtos, NOT_SERVING, SERVING, type HealthCheckResponse } from './protos.js';
import { BODY_CHUNK_BYTES } from './stream.js';
import { EppServer } from './server.js';

function engine(name: string): Promise<EngineServer> {
  return startEngine({
    port: 0,
    api: 'both',
    models: ['m1'],
    name,
    profile: defaultProfile({ slots: 8, baseStepS: 0.001, perSeqS: 0, perTokenS: 0, prefillPerTokenS: 0 }),
    timeScale: 1,
    seed: 1,
    defaultOutputTokens: { mean: 8 },
  });
}

function backend(name: string, url: string, over: Partial<BackendConfig> = {}): BackendConfig {
  return { name, url, api: 'openai', models: ['m1'], maxConcurrency: Infinity, weight: 1, ...over };
}

function settings(backends: BackendConfig[], over: Partial<RouterSettings> = {}): RouterSettings {
  return {
    server: { host: '127.0.0.1', port: 0, maxBodyBytes: 10 * 1024 * 1024 },
    backends,
    policy: { name: 'least-connections', params: {} },
    retry: { attempts: 1, backoffMs: 5 },
    timeouts: { connectMs: 1000, firstByteMs: 10_000, idleMs: 10_000 },
    health: { failuresToEject: 1, probeIntervalMs: 50, probeTimeoutMs: 300, scrapeIntervalMs: 100 },
    discovery: { refreshMs: 1000 },
    queue: { maxLength: 1000, maxWaitMs: 30_000 },
    log: { level: 'silent', prompts: false },
    ...over,
  };
}

async function waitFor(cond: () => boolean, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

interface Picker {
  router: Router;
  epp: EppServer;
  envoy: FakeEnvoy;
  httpUrl: string;
  close(): Promise<void>;
}

async function picker(s: RouterSettings, random: () => number = Math.random): Promise<Picker> {
  const router = new Router(s, silentLogger(), random);
  const httpUrl = await router.listen('127.0.0.1', 0);
  const epp = new EppServer(router, { host: '127.0.0.1', port: 0, healthPort: 0, fallbacks: 2 });
  await epp.listen();
  const envoy = new FakeEnvoy(`127.0.0.1:${epp.port}`);
  return {
    router,
    epp,
    envoy,
    httpUrl,
    async close() {
      envoy.close();
      await epp.close();
      await router.close();
    },
  };
}

/** Nothing held: no stream open, no slot, nothing queued. */
function assertNothingHeld(p: Picker): void {
  assert.equal(p.epp.ctx.open, 0, 'streams open');
  assert.equal(p.router.scheduler.queueLength, 0, 'queued');
  for (const b of p.router.scheduler.backendViews()) assert.equal(b.inFlight, 0, `in flight on ${b.name}`);
}

async function settled(p: Picker): Promise<void> {
  await waitFor(
    () =>
      p.epp.ctx.open === 0 &&
      p.router.scheduler.queueLength === 0 &&
      p.router.scheduler.backendViews().every((b) => b.inFlight === 0),
    'everything given back',
  );
  assertNothingHeld(p);
}

const chat = (content: string, over: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: 'm1',
  messages: [{ role: 'user', content }],
  max_tokens: 8,
  ...over,
});

describe('llmlb epp (ext_proc v3, FULL_DUPLEX_STREAMED)', () => {
  let a: EngineServer;
  let b: EngineServer;
  let p: Picker;
  const addr = (e: EngineServer): string => e.url.replace('http://', '');

  before(async () => {
    a = await engine('a');
    b = await engine('b');
    p = await picker(settings([backend('a', a.url), backend('b', b.url)]));
  });
  after(async () => {
    await p.close();
    await a.close();
    await b.close();
  });

  it('picks an endpoint: header, envoy.lb metadata and fallback; body handed back whole, in order', async () => {
    const body = chat('héllo wörld — split at odd bytes '.repeat(20));
    const raw = Buffer.from(JSON.stringify(body));
    const r = await p.envoy.request({ body: raw, split: [1, 7, 3, 13, 2, 101] });
    assert.equal(r.immediate, undefined);
    assert.ok(r.destination && r.destination.length === 2, String(r.destination));
    assert.ok([addr(a), addr(b)].includes(r.destination[0]!));
    assert.notEqual(r.destination[0], r.destination[1], 'the fallback is the other endpoint');
    assert.equal(r.metadataDestination, r.destination.join(','));
    assert.deepEqual(r.forwardedBody, raw, 'the body comes back byte for byte');
    assert.equal(r.order[0], 'request_headers');
    assert.equal(r.order[1], 'request_body');
    assert.equal(r.order[r.order.indexOf('response_headers') - 1], 'request_body');
    assert.equal(r.status, 200);
    const answer = JSON.parse(r.clientBody!) as { usage: { completion_tokens: number } };
    assert.ok(answer.usage.completion_tokens > 0);
    await settled(p);
    const metrics = await (await fetch(`${p.httpUrl}/metrics`)).text();
    assert.match(metrics, /llmlb_requests_total\{[^}]*status="200"[^}]*\} 1/);
    assert.match(metrics, /^llmlb_epp_streams 0$/m);
  });

  it('hands a large body back in chunks of at most 62 KB; trailers come last', async () => {
    const raw = Buffer.from(JSON.stringify(chat('x'.repeat(300_000))));
    const r = await p.envoy.request({ body: raw, split: [65_537, 4_099], trailers: true });
    assert.deepEqual(r.forwardedBody, raw);
    assert.ok(
      r.bodyChunkSizes!.every((n) => n <= BODY_CHUNK_BYTES),
      String(r.bodyChunkSizes),
    );
    assert.ok(r.bodyChunkSizes!.length >= 5);
    const iTrailers = r.order.indexOf('request_trailers');
    assert.ok(iTrailers > r.order.lastIndexOf('request_body'), r.order.join(' '));
    assert.equal(r.status, 200);
    await settled(p);
  });

  it('streams (SSE) through the picker: usage asked for, counted, and the extra event dropped', async () => {
    const r = await p.envoy.request({ body: chat('stream me', { stream: true }), split: [5] });
    assert.equal(r.status, 200);
    assert.match(r.clientBody!, /data: \[DONE\]/);
    assert.doesNotMatch(r.clientBody!, /"usage"/, 'the client did not ask for usage');
    assert.match(r.forwardedBody!.toString(), /"include_usage":true/);
    await settled(p);
  });

  it('reads Ollama bodies (/api/generate) and their counts', async () => {
    const r = await p.envoy.request({
      path: '/api/generate',
      body: { model: 'm1', prompt: 'hi', stream: false, options: { num_predict: 4 } },
      split: [3],
    });
    assert.equal(r.status, 200);
    assert.match(r.clientBody!, /"eval_count"/);
    await settled(p);
  });

  it('answers malformed, model-less and unknown-model bodies itself (400, 400, 404), in the API format', async () => {
    const bad = await p.envoy.request({ body: '{"model": "m1", "messages": [', split: [4] });
    assert.equal(bad.immediate?.status, 400);
    assert.match(JSON.parse(bad.immediate.body).error.code as string, /invalid_json/);
    const none = await p.envoy.request({ body: { messages: [] } });
    assert.equal(none.immediate?.status, 400);
    assert.equal(JSON.parse(none.immediate.body).error.code, 'missing_model');
    const unknown = await p.envoy.request({ body: chat('x', { model: 'nope' }) });
    assert.equal(unknown.immediate?.status, 404);
    const ollama = await p.envoy.request({ path: '/api/chat', body: { model: 'nope', messages: [] } });
    assert.equal(ollama.immediate?.status, 404);
    assert.equal(typeof JSON.parse(ollama.immediate.body).error, 'string', 'Ollama error shape');
    const get = await p.envoy.request({ method: 'GET', path: '/v1/models' });
    assert.equal(get.immediate?.status, 400);
    await settled(p);
  });

  it('refuses a 64 MB body with 413 without keeping it', async () => {
    const big = Buffer.alloc(64 << 20, 0x61);
    const r = await p.envoy.request({ body: big, split: [1 << 20] });
    assert.equal(r.immediate?.status, 413);
    await settled(p);
  });

  it('honours the subset hint (metadata and header)', async () => {
    for (let i = 0; i < 4; i++) {
      const m = await p.envoy.request({ body: chat(`m${i}`), subsetMetadata: [addr(b)] });
      assert.deepEqual(m.destination, [addr(b)], 'only b may be named');
      const h = await p.envoy.request({ body: chat(`h${i}`), subsetHeader: `${addr(a)}` });
      assert.deepEqual(h.destination, [addr(a)]);
    }
    const none = await p.envoy.request({ body: chat('x'), subsetHeader: '10.9.9.9:1' });
    assert.equal(none.immediate?.status, 503);
    await settled(p);
  });

  it('many streams at once: all answered, spread over both endpoints, nothing left held', async () => {
    const n = 60;
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        p.envoy.request({ body: chat(`concurrent ${i} `.repeat(i + 1)), split: [1 + (i % 17), 5] }),
      ),
    );
    assert.ok(results.every((r) => r.status === 200));
    const picked = new Set(results.map((r) => r.destination![0]));
    assert.equal(picked.size, 2);
    await settled(p);
  });

  it('a stream cancelled after the pick or mid-response gives its slot back', async () => {
    const r1 = await p.envoy.request({ body: chat('cancel me'), cancelAt: 'decision' });
    assert.ok(r1.destination);
    await settled(p);
    const r2 = await p.envoy.request({ body: chat('cancel later', { stream: true }), cancelAt: 'response' });
    assert.equal(r2.status, 200);
    await settled(p);
  });

  it('counts a fallback that served under its own backend; a 429 from a backend rests it', async () => {
    const before = await (await fetch(`${p.httpUrl}/metrics`)).text();
    const count = (text: string, name: string): number =>
      Number(
        new RegExp(`llmlb_requests_total\\{backend="${name}",status="200"\\} (\\d+)`).exec(text)?.[1] ?? 0,
      );
    const r = await p.envoy.request({ body: chat('fallback'), serveAt: (d) => d[1]! });
    assert.equal(r.status, 200);
    const servedName = r.destination![1] === addr(a) ? 'a' : 'b';
    const after = await (await fetch(`${p.httpUrl}/metrics`)).text();
    assert.equal(count(after, servedName), count(before, servedName) + 1);
    await settled(p);
    const sat = await p.envoy.request({
      body: chat('full'),
      fakeResponse: { status: 429, body: '{"error":"busy"}', headers: { 'retry-after': '30' } },
    });
    const rested = sat.destination![0] === addr(a) ? addr(b) : addr(a);
    for (let i = 0; i < 3; i++) {
      const next = await p.envoy.request({ body: chat(`after 429 ${i}`) });
      assert.equal(next.destination![0], rested, 'the saturated backend rests');
    }
    p.router.cooldowns.cool(sat.destination![0] === addr(a) ? 'a' : 'b', 0, 0);
    await settled(p);
  });

  it('grpc.health.v1: liveness and readiness on both ports', async () => {
    for (const port of [p.epp.port, p.epp.healthPort]) {
      assert.equal(await health(port, ''), SERVING);
      assert.equal(await health(port, 'envoy.service.ext_proc.v3.ExternalProcessor'), SERVING);
      await assert.rejects(health(port, 'nope'), /NOT_FOUND|unknown service/);
    }
    // Watch: the current status at once.
    const { Health } = eppProtos();
    const c = new Health(`127.0.0.1:${p.epp.healthPort}`, credentials.createInsecure()) as unknown as {
      Watch(req: object): import('@grpc/grpc-js').ClientReadableStream<HealthCheckResponse>;
      close(): void;
    };
    const w = c.Watch({ service: 'readiness' });
    const first = await new Promise<HealthCheckResponse>((resolve) => w.once('data', resolve));
    assert.equal(first.status, SERVING);
    w.on('error', () => undefined);
    w.cancel();
    c.close();
  });
});

function health(port: number, service: string): Promise<number | undefined> {
  const { Health } = eppProtos();
  const c = new Health(`127.0.0.1:${port}`, credentials.createInsecure());
  return new Promise((resolve, reject) => {
    (
      c as unknown as { Check(req: object, cb: (e: Error | null, r?: HealthCheckResponse) => void): void }
    ).Check({ service }, (err, r) => {
      c.close();
      if (err) reject(err);
      else resolve(r?.status);
    });
  });
}

describe('llmlb epp: queue, unready backends, and serve parity', () => {
  it('queued behind a full backend: waits, then goes when the slot frees; cancelled while queued: gone', async () => {
    const e = await engine('one');
    const p = await picker(settings([backend('a', e.url, { maxConcurrency: 1 })]));
    try {
      // Hold the only slot: a stream that stops after the pick (kept open).
      const { ExternalProcessor } = eppProtos();
      const raw = new ExternalProcessor(
        `127.0.0.1:${p.epp.port}`,
        credentials.createInsecure(),
      ) as unknown as {
        Process(): import('@grpc/grpc-js').ClientDuplexStream<object, object>;
        close(): void;
      };
      const holder = raw.Process();
      holder.on('data', () => undefined);
      holder.on('error', () => undefined);
      holder.write({
        request_headers: {
          headers: { headers: [{ key: ':path', raw_value: Buffer.from('/v1/chat/completions') }] },
        },
      });
      holder.write({
        request_body: { body: Buffer.from(JSON.stringify(chat('hold'))), end_of_stream: true },
      });
      await waitFor(() => p.router.scheduler.backendViews()[0]!.inFlight === 1, 'slot taken');
      const waiting = raw.Process();
      waiting.on('data', () => undefined);
      waiting.on('error', () => undefined);
      waiting.write({
        request_headers: {
          headers: { headers: [{ key: ':path', raw_value: Buffer.from('/v1/chat/completions') }] },
        },
      });
      waiting.write({
        request_body: { body: Buffer.from(JSON.stringify(chat('wait'))), end_of_stream: true },
      });
      await waitFor(() => p.router.scheduler.queueLength === 1, 'queued');
      waiting.cancel();
      await waitFor(() => p.router.scheduler.queueLength === 0, 'queue place given back');
      // A third waits, and goes when the holder's stream ends.
      const third = p.envoy.request({ body: chat('third') });
      await waitFor(() => p.router.scheduler.queueLength === 1, 'third queued');
      holder.cancel();
      const r = await third;
      assert.equal(r.status, 200);
      raw.close();
      await settled(p);
    } finally {
      await p.close();
      await e.close();
    }
  });

  it('a model over its quota (its wait past queue.maxWaitMs) is shed with 429; the lease goes with the stream', async () => {
    const e = await engine('q');
    const p = await picker(
      settings([backend('a', e.url)], {
        quotas: {
          models: { m1: { weight: 1, maxConcurrent: 1, tokensPerMinute: 1e6, requestsPerMinute: 1e4 } },
        },
        admission: { leaseTtlMs: 60_000, reclaimIntervalMs: 50, tickMs: 100 },
        queue: { maxLength: 1000, maxWaitMs: 300 },
      }),
    );
    try {
      const { ExternalProcessor } = eppProtos();
      const raw = new ExternalProcessor(
        `127.0.0.1:${p.epp.port}`,
        credentials.createInsecure(),
      ) as unknown as {
        Process(): import('@grpc/grpc-js').ClientDuplexStream<object, object>;
        close(): void;
      };
      const holder = raw.Process();
      let answered = false;
      holder.on('data', () => (answered = true));
      holder.on('error', () => undefined);
      holder.write({
        request_headers: {
          headers: { headers: [{ key: ':path', raw_value: Buffer.from('/v1/chat/completions') }] },
        },
      });
      holder.write({
        request_body: { body: Buffer.from(JSON.stringify(chat('hold'))), end_of_stream: true },
      });
      await waitFor(() => answered, 'the holder picked');
      const shed = await p.envoy.request({ body: chat('over quota') });
      assert.equal(shed.immediate?.status, 429, JSON.stringify(shed.immediate));
      // Shed at once when the quota's own hint is already past queue.maxWaitMs, else after waiting.
      assert.equal(JSON.parse(shed.immediate.body).error.code, 'quota_wait_timeout');
      holder.cancel();
      await settled(p);
      // The lease went with the holder's stream: the next ones pass, one after the other.
      for (let i = 0; i < 3; i++)
        assert.equal((await p.envoy.request({ body: chat(`then ${i}`) })).status, 200);
      raw.close();
      await settled(p);
    } finally {
      await p.close();
      await e.close();
    }
  });

  it('a backend going unready mid-run: traffic moves off it; none ready → 503 and readiness NOT_SERVING', async () => {
    const a = await engine('a');
    const b = await engine('b');
    const p = await picker(settings([backend('a', a.url), backend('b', b.url)]));
    const addrA = a.url.replace('http://', '');
    try {
      await b.close();
      await waitFor(() => p.router.scheduler.backend('b')?.healthy === false, 'b unready');
      for (let i = 0; i < 5; i++) {
        const r = await p.envoy.request({ body: chat(`after b ${i}`) });
        assert.deepEqual(r.destination, [addrA]);
        assert.equal(r.status, 200);
      }
      await a.close();
      await waitFor(() => p.router.scheduler.backend('a')?.healthy === false, 'a unready');
      const r = await p.envoy.request({ body: chat('nobody') });
      assert.equal(r.immediate?.status, 503);
      assert.equal(r.immediate.headers['retry-after'], '1');
      assert.equal(await health(p.epp.healthPort, 'readiness'), NOT_SERVING);
      assert.equal(await health(p.epp.healthPort, 'liveness'), SERVING);
      await settled(p);
    } finally {
      await p.close();
    }
  });

  it('the same trace through serve and through epp gives the same decisions', async () => {
    const engines = await Promise.all(['a', 'b', 'c'].map(engine));
    const backends = engines.map((e, i) => backend('abc'[i]!, e.url));
    const seeded = (): (() => number) => {
      let s = 42;
      return () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    };
    const trace = Array.from({ length: 24 }, (_, i) => ({
      prompt: `${['alpha', 'beta', 'gamma'][i % 3]} shared prefix ${'x'.repeat(40)} then ${i % 5}`,
      session: `s${i % 4}`,
    }));
    try {
      for (const policy of ['prefix-trie', 'consistent-hash', 'round-robin']) {
        const s = settings(backends, { policy: { name: policy, params: {} } });
        const serve = new Router(s, silentLogger(), seeded());
        const url = await serve.listen('127.0.0.1', 0);
        for (const t of trace) {
          const res = await fetch(`${url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-session-token': t.session },
            body: JSON.stringify(chat(t.prompt)),
          });
          await res.arrayBuffer();
        }
        const served = serve.decisionLog.list(100).decisions.reverse();
        await serve.close();
        const p = await picker(s, seeded());
        for (const t of trace)
          await p.envoy.request({
            body: chat(t.prompt),
            headers: { 'x-session-token': t.session },
            split: [11],
          });
        const picked = p.router.decisionLog.list(100).decisions.reverse();
        await p.close();
        assert.equal(picked.length, trace.length);
        assert.deepEqual(
          picked.map((d) => [d.backend, d.outcome]),
          served.map((d) => [d.backend, d.outcome]),
          policy,
        );
        assert.ok(new Set(picked.map((d) => d.backend)).size > 1, `${policy} used more than one backend`);
      }
    } finally {
      await Promise.all(engines.map((e) => e.close()));
    }
  });
});
