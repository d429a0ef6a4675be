import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import type { EngineServer } from '../src/engine/server.js';
import type { Router } from '../src/proxy/router.js';
import { backend, engine, post, router, settings, waitFor } from './helpers.js';

describe('proxy with the official clients', () => {
  let a: EngineServer;
  let b: EngineServer;
  let v: EngineServer;
  let r: Router;
  let url: string;

  before(async () => {
    a = await engine({ models: ['m1', 'shared'] });
    b = await engine({ models: ['m1'] });
    v = await engine({ api: 'openai', models: ['vllm-only'] });
    ({ router: r, url } = await router(
      settings(
        [
          backend('a', a.url, { models: undefined }), // discovered from /api/tags
          backend('b', b.url),
          backend('v', v.url, { api: 'openai', models: undefined }), // discovered from /v1/models
        ],
        { admin: { token: 't' } },
      ),
    ));
  });
  after(async () => {
    await r.close();
    await Promise.all([a.close(), b.close(), v.close()]);
  });

  test('ollama generate and chat, stream and not', async () => {
    const ollama = new Ollama({ host: url });
    const g = await ollama.generate({
      model: 'm1',
      prompt: 'hello there',
      stream: false,
      options: { num_predict: 7 },
    });
    assert.equal(g.done, true);
    assert.equal(g.eval_count, 7);
    assert.ok((g.response ?? '').length > 0);
    const parts: string[] = [];
    let last: { done: boolean; eval_count?: number } | undefined;
    for await (const c of await ollama.chat({
      model: 'm1',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      options: { num_predict: 5 },
    })) {
      parts.push(c.message.content);
      last = c;
    }
    assert.ok(parts.length >= 2, 'streamed in several chunks');
    assert.equal(last?.done, true);
    assert.equal(last?.eval_count, 5);
  });

  test('openai chat and completions, stream and not', async () => {
    const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused' });
    const c = await openai.chat.completions.create({
      model: 'm1',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 6,
    });
    assert.equal(c.usage?.completion_tokens, 6);
    const s = await openai.completions.create({
      model: 'm1',
      prompt: 'hello',
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: number | undefined;
    for await (const ch of s) {
      text += ch.choices[0]?.text ?? '';
      if (ch.usage) usage = ch.usage.completion_tokens;
    }
    assert.ok(text.length > 0);
    assert.equal(usage, 4);
    const viaVllm = await openai.chat.completions.create({
      model: 'vllm-only',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 3,
    });
    assert.equal(viaVllm.usage?.completion_tokens, 3);
  });

  test('ollama request for a model only an openai backend has is translated, streaming included', async () => {
    const ollama = new Ollama({ host: url });
    const g = await ollama.generate({
      model: 'vllm-only',
      prompt: 'hi',
      stream: false,
      options: { num_predict: 4 },
    });
    assert.equal(g.eval_count, 4);
    assert.ok(g.prompt_eval_count > 0);
    assert.ok((g.response ?? '').length > 0);
    let last: { done: boolean; eval_count?: number; prompt_eval_count?: number } | undefined;
    let text = '';
    for await (const ch of await ollama.chat({
      model: 'vllm-only',
      messages: [{ role: 'user', content: 'hello' }],
      stream: true,
      options: { num_predict: 6 },
    })) {
      text += ch.message.content;
      last = ch;
    }
    assert.ok(text.length > 0);
    assert.equal(last?.done, true);
    assert.equal(last?.eval_count, 6);
    assert.ok((last?.prompt_eval_count ?? 0) > 0);
  });

  test('every proxied response names its backend and request id', async () => {
    const res = await post(
      `${url}/api/generate`,
      { model: 'm1', prompt: 'x', stream: false },
      { 'x-request-id': 'abc-1' },
    );
    assert.equal(res.status, 200);
    assert.ok(['a', 'b'].includes(res.headers.get('x-llmlb-backend') ?? ''));
    assert.equal(res.headers.get('x-request-id'), 'abc-1');
    await res.arrayBuffer();
    const alias = await post(`${url}/ollama/generate`, { model: 'shared', prompt: 'x', stream: false });
    assert.equal(alias.headers.get('x-llmlb-backend'), 'a');
    assert.ok(alias.headers.get('x-request-id'));
    await alias.arrayBuffer();
  });

  test('tags and models list the union of the fleet', async () => {
    const tags = (await (await fetch(`${url}/api/tags`)).json()) as { models: { name: string }[] };
    const names = tags.models.map((m) => m.name);
    for (const m of ['m1', 'shared', 'vllm-only'])
      assert.ok(
        names.some((n) => n === m || n === `${m}:latest`),
        m,
      );
    const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
    assert.deepEqual(
      models.data.map((m) => m.id).filter((id) => !id.endsWith(':latest')),
      ['m1', 'shared', 'vllm-only'],
    );
    const ver = (await (await fetch(`${url}/api/version`)).json()) as { version: string };
    assert.equal(typeof ver.version, 'string');
  });

  test('bad input gets errors in the API format and changes no state', async () => {
    const cases: [string, string | object, number, RegExp][] = [
      ['/api/generate', '{nope', 400, /invalid JSON/],
      ['/api/generate', { prompt: 'x' }, 400, /model is required/],
      ['/api/generate', { model: 'ghost', prompt: 'x' }, 404, /model 'ghost' not found; available: .*m1/],
      ['/api/chat', { model: 'm1', messages: 'x' }, 400, /messages must be an array/],
    ];
    for (const [path, body, status, re] of cases) {
      const res = await post(url + path, body);
      assert.equal(res.status, status, path);
      assert.ok(res.headers.get('x-request-id'), 'errors carry x-request-id too');
      const j = (await res.json()) as { error: string };
      assert.match(j.error, re);
    }
    const oa = await post(`${url}/v1/chat/completions`, '[1]');
    assert.equal(oa.status, 400);
    const e = (await oa.json()) as { error: { message: string; type: string; code: string } };
    assert.equal(e.error.type, 'invalid_request_error');
    assert.equal(typeof e.error.code, 'string');
    const big = await post(`${url}/api/generate`, { model: 'm1', prompt: 'x'.repeat(2 << 20) });
    assert.equal(big.status, 413);
    await big.arrayBuffer();
    const unknown = await fetch(`${url}/v1/nothing`);
    assert.equal(unknown.status, 404);
    assert.ok(((await unknown.json()) as { error: { message: string } }).error.message);
    const wrong = await fetch(`${url}/api/generate`);
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.get('allow'), 'POST');
    await wrong.arrayBuffer();
    for (const v of r.scheduler.backendViews()) assert.equal(v.inFlight, 0);
    assert.equal(r.scheduler.queueLength, 0);
  });

  test('engine load is scraped from /metrics where the backend exports it', async () => {
    await waitFor(() => r.scheduler.backend('b')?.metrics !== undefined, 4000, 'first scrape');
    const m = r.scheduler.backend('b')!.metrics!;
    assert.equal(m.running, 0);
    assert.equal(m.waiting, 0);
    const st = (await (
      await fetch(`${url}/admin/backends`, { headers: { authorization: 'Bearer t' } })
    ).json()) as {
      backends: { name: string; metrics: unknown }[];
    };
    assert.ok(st.backends.find((x) => x.name === 'b')?.metrics);
  });

  test('metrics and admin state', async () => {
    const m = await (await fetch(`${url}/metrics`)).text();
    for (const name of [
      'llmlb_requests_total',
      'llmlb_backend_in_flight',
      'llmlb_router_queue_length',
      'llmlb_upstream_duration_seconds',
      'llmlb_upstream_ttfb_seconds',
      'llmlb_retries_total',
      'llmlb_backend_ejections_total',
    ]) {
      assert.ok(m.includes(name), name);
    }
    // The shipped Grafana dashboard only uses names the router exports.
    const grafana = readFileSync(new URL('../docs/grafana-llmlb.json', import.meta.url), 'utf8');
    const used = new Set(
      [...grafana.matchAll(/llmlb_[a-z_]+/g)].map((x) => x[0].replace(/_(bucket|sum|count)$/, '')),
    );
    assert.ok(used.size >= 8);
    for (const name of used)
      assert.ok(m.includes(`# TYPE ${name} `), `grafana uses ${name}, not in /metrics`);
    const st = (await (
      await fetch(`${url}/admin/backends`, { headers: { authorization: 'Bearer t' } })
    ).json()) as {
      backends: { name: string; healthy: boolean; inFlight: number }[];
    };
    assert.deepEqual(
      st.backends.map((x) => [x.name, x.healthy, x.inFlight]),
      [
        ['a', true, 0],
        ['b', true, 0],
        ['v', true, 0],
      ],
    );
    const h = await fetch(`${url}/healthz`);
    assert.equal(h.status, 200);
    await h.arrayBuffer();
  });
});

/** An upstream that records what it receives and answers like Ollama. */
function capturingUpstream(): Promise<{
  url: string;
  seen: { path: string; body: string; headers: IncomingMessage['headers'] }[];
  server: Server;
}> {
  const seen: { path: string; body: string; headers: IncomingMessage['headers'] }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST')
        seen.push({ path: req.url ?? '', body: Buffer.concat(chunks).toString(), headers: req.headers });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          model: 'm1',
          response: 'ok',
          done: true,
          prompt_eval_count: 1,
          eval_count: 1,
          version: '0.9.9',
        }),
      );
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server }),
    ),
  );
}

test('bodies are forwarded byte for byte, every field kept', async () => {
  const up = await capturingUpstream();
  const { router: r, url } = await router(settings([backend('cap', up.url)]));
  try {
    const body =
      '{"model":"m1","prompt":"p","system":"sys","format":{"type":"object"},"options":{"temperature":0.1,"num_ctx":8192},' +
      '"keep_alive":"5m","tools":[{"type":"function"}],"images":[],"stream":false,  "extra":[1,2,3]}';
    const res = await post(`${url}/api/generate`, body, {
      'x-llmlb-output-tokens': '9',
      authorization: 'Bearer k',
    });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    const got = up.seen.find((s) => s.path === '/api/generate');
    assert.equal(got?.body, body);
    assert.equal(got?.headers['x-llmlb-output-tokens'], '9');
    assert.equal(got?.headers.authorization, 'Bearer k');
  } finally {
    await r.close();
    up.server.close();
  }
});

test('maxConcurrency is never exceeded; waiters are pushed as slots free', async () => {
  const e = await engine({ profile: (await import('./helpers.js')).fastProfile({ baseStepS: 0.01 }) });
  const { router: r, url } = await router(settings([backend('e', e.url, { maxConcurrency: 2 })]));
  try {
    let maxSeen = 0;
    const timer = setInterval(() => {
      maxSeen = Math.max(maxSeen, r.scheduler.backend('e')?.inFlight ?? 0);
    }, 1);
    const res = await Promise.all(
      Array.from({ length: 8 }, () =>
        post(
          `${url}/api/generate`,
          { model: 'm1', prompt: 'x', stream: false },
          { 'x-llmlb-output-tokens': '5' },
        ).then(async (x) => [x.status, await x.text()] as const),
      ),
    );
    clearInterval(timer);
    assert.deepEqual(
      res.map((x) => x[0]),
      Array(8).fill(200),
    );
    assert.ok(maxSeen <= 2, `saw ${maxSeen} in flight`);
    assert.equal(e.stats().requests, 8);
    assert.equal(r.scheduler.backend('e')?.inFlight, 0);
  } finally {
    await r.close();
    await e.close();
  }
});

test('a client that disconnects aborts the upstream request and frees its slot', async () => {
  const e = await engine({ profile: (await import('./helpers.js')).fastProfile({ baseStepS: 0.05 }) });
  const { router: r, url } = await router(settings([backend('e', e.url, { maxConcurrency: 1 })]));
  try {
    const ac = new AbortController();
    const p = post(`${url}/api/generate`, { model: 'm1', prompt: 'x' }, { 'x-llmlb-output-tokens': '1000' });
    void p.then((res) => res.body?.cancel()).catch(() => undefined);
    const queued = fetch(`${url}/api/generate`, {
      method: 'POST',
      body: JSON.stringify({ model: 'm1', prompt: 'y' }),
      signal: ac.signal,
    }).catch(() => undefined);
    await waitFor(() => r.scheduler.queueLength === 1, 2000, 'second request queued');
    ac.abort(); // leaves while queued
    await queued;
    await waitFor(
      () => r.scheduler.queueLength === 0 && r.scheduler.inFlightTotal === 0,
      3000,
      'slots freed',
    );
    await waitFor(() => e.stats().running === 0, 3000, 'engine sequence cancelled');
  } finally {
    await r.close();
    await e.close();
  }
});

test('InferenceObjective priorities (objectives, x-gateway-inference-objective) order the router queue', async () => {
  const e = await engine({ profile: (await import('./helpers.js')).fastProfile({ baseStepS: 0.01 }) });
  const { router: r, url } = await router(
    settings([backend('e', e.url, { maxConcurrency: 1 })], {
      objectives: { critical: { priority: 10 }, batch: { priority: -1 } },
    }),
  );
  try {
    const done: string[] = [];
    const send = (name: string, objective: string | undefined, tokens: number) =>
      post(
        `${url}/api/generate`,
        { model: 'm1', prompt: name, stream: false },
        {
          'x-llmlb-output-tokens': String(tokens),
          ...(objective ? { 'x-gateway-inference-objective': objective } : {}),
        },
      ).then(async (x) => {
        await x.text();
        done.push(`${name} ${x.status}`);
      });
    const first = send('first', undefined, 40);
    await waitFor(() => r.scheduler.inFlightTotal === 1, 2000, 'first in flight');
    const rest = [send('batch', 'batch', 2)];
    await waitFor(() => r.scheduler.queueLength === 1, 2000, 'batch queued');
    rest.push(send('plain', undefined, 2));
    await waitFor(() => r.scheduler.queueLength === 2, 2000, 'plain queued');
    rest.push(send('unknown', 'no-such-objective', 2));
    await waitFor(() => r.scheduler.queueLength === 3, 2000, 'unknown queued');
    rest.push(send('critical', 'critical', 2));
    await waitFor(() => r.scheduler.queueLength === 4, 2000, 'critical queued');
    await Promise.all([first, ...rest]);
    assert.deepEqual(done, ['first 200', 'critical 200', 'plain 200', 'unknown 200', 'batch 200']);
  } finally {
    await r.close();
    await e.close();
  }
});
