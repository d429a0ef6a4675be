/**
 * Fuzz every public route of a live router (issue 16): random bodies (JSON of any shape with
 * prototype keys, nesting up to 50,000 deep, megabyte strings, invalid UTF-8, raw bytes), random
 * paths (percent garbage), random framing (odd content-length, chunked, both). Requests go over
 * raw sockets so nothing is normalized on the way. Asserted: every answer is a 2xx/3xx/4xx or a
 * documented upstream 5xx (502/503/504, never 500); nothing hangs; the router process survives;
 * afterwards no backend holds an in-flight slot, the queue is empty and no quota lease is left.
 * Bounded: fast-check stops generating after FUZZ_MS (default 40 s).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import fc from 'fast-check';
import type { EngineServer } from '../src/engine/server.js';
import { parseBackendEntry } from '../src/config/load.js';
import { silentLogger } from '../src/log.js';
import { Router } from '../src/proxy/router.js';
import { backend, engine, settings, waitFor } from './helpers.js';

const TOKEN = 'fuzz-token';
const FUZZ_MS = Number(process.env.FUZZ_MS ?? 40_000);
/** Longest a well-framed request may take to get its status line. */
const ANSWER_MS = 15_000;

let ollama: EngineServer;
let openai: EngineServer;
let r: Router;
let port: number;

before(async () => {
  [ollama, openai] = await Promise.all([
    engine({ api: 'ollama', models: ['m1', 'm2'] }),
    engine({ api: 'openai', models: ['m1', 'm2'] }),
  ]);
  r = new Router(
    settings(
      [
        backend('o', ollama.url, { models: ['m1', 'm2'], maxConcurrency: 4 }),
        // Ollama requests to it are translated: the deep-JSON path of defect 2.
        backend('v', openai.url, { api: 'openai', models: ['m1', 'm2'], maxConcurrency: 4 }),
      ],
      {
        admin: { token: TOKEN },
        quotas: {
          models: {
            m1: { weight: 1, maxConcurrent: 6, tokensPerMinute: 10_000_000, requestsPerMinute: 100_000 },
          },
        },
        queue: { maxLength: 1000, maxWaitMs: 2000 },
        timeouts: { connectMs: 1000, firstByteMs: 5000, idleMs: 5000 },
        retry: { attempts: 2, backoffMs: 5 },
      },
    ),
    silentLogger(),
    Math.random,
    parseBackendEntry,
  );
  port = Number(new URL(await r.listen('127.0.0.1', 0)).port);
});

after(async () => {
  await r.close();
  await Promise.all([ollama.close(), openai.close()]);
});

const ROUTES = [
  '/api/generate',
  '/api/chat',
  '/ollama/generate',
  '/v1/completions',
  '/v1/chat/completions',
  '/api/tags',
  '/api/version',
  '/v1/models',
  '/healthz',
  '/metrics',
  '/schedule',
  '/complete',
  '/heartbeat',
  '/advice',
  '/admin/backends',
  '/admin/policy',
  '/admin/decisions',
  '/admin/quotas',
  '/admin/quotas/m1',
  '/admin/backends/o/drain',
  '/admin/backends/o/undrain',
  '/dashboard',
  '/dashboard/',
  '/dashboard/app.js',
  '/dashboard/events',
];

const PROTO_KEYS = ['__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty', 'prototype'];
const FIELDS = [
  'model',
  'prompt',
  'messages',
  'stream',
  'options',
  'format',
  'tools',
  'max_tokens',
  'num_predict',
  'estimated_tokens',
  'task_id',
  'name',
  'url',
  'api',
  'models',
  'weight',
  'maxConcurrency',
  'policy',
  'backend',
  'maxConcurrent',
  'tokensPerMinute',
  'role',
  'content',
  'user',
  'keep_alive',
  'raw',
];

const key = fc.oneof(fc.constantFrom(...PROTO_KEYS, ...FIELDS), fc.string({ maxLength: 8 }));
const model = fc.oneof(fc.constantFrom('m1', 'm2', 'nope', '', ...PROTO_KEYS), fc.string({ maxLength: 6 }));

/** JSON of any shape whose keys are often prototype names or fields some route reads. */
const anyJson: fc.Arbitrary<unknown> = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.oneof(fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.string({ maxLength: 20 }), model),
    fc.array(tie('v'), { maxLength: 4 }),
    fc.dictionary(key, tie('v'), { maxKeys: 5 }),
  ),
})).v;

/** `{"a":{"a":…}}` or `[[…]]` n deep, as text (JSON.stringify would recurse). */
const deep = fc
  .tuple(fc.integer({ min: 1, max: 50_000 }), fc.boolean())
  .map(([n, obj]) => (obj ? '{"a":'.repeat(n) + '1' + '}'.repeat(n) : '['.repeat(n) + ']'.repeat(n)));

/** A body shaped like what the proxy routes take, fields replaced or made hostile at random. */
const requestLike = fc
  .record(
    {
      model,
      prompt: fc.string({ maxLength: 40 }),
      stream: fc.oneof(fc.boolean(), anyJson),
      messages: fc.oneof(
        fc.array(
          fc.record({ role: fc.constantFrom('user', 'system', 'assistant', 'tool'), content: fc.string() }),
          {
            maxLength: 3,
          },
        ),
        anyJson,
      ),
      options: fc.dictionary(key, anyJson, { maxKeys: 4 }),
      format: anyJson,
      tools: anyJson,
      max_tokens: fc.oneof(fc.integer({ min: -5, max: 8 }), anyJson),
      estimated_tokens: fc.oneof(fc.integer({ min: -5, max: 100 }), anyJson),
      task_id: fc.oneof(fc.string({ maxLength: 10 }), anyJson),
    },
    { requiredKeys: [] },
  )
  .chain((o) =>
    fc.oneof(
      fc.constant(JSON.stringify(o)),
      // A deep `format` / `tools` / `options` inside an otherwise valid request.
      fc
        .tuple(fc.constantFrom('format', 'tools', 'options', 'messages'), deep)
        .map(([k, d]) =>
          JSON.stringify({ ...o, model: 'm1', stream: false }).replace(/^\{/, `{"${k}":${d},`),
        ),
    ),
  );

const body: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 4, arbitrary: requestLike.map((s) => Buffer.from(s)) },
  { weight: 2, arbitrary: anyJson.map((v) => Buffer.from(JSON.stringify(v) ?? 'null')) },
  { weight: 1, arbitrary: deep.map((s) => Buffer.from(s)) },
  {
    weight: 1,
    // A huge prompt: under the 1 MiB body limit or over it (413).
    arbitrary: fc
      .integer({ min: 100_000, max: 1_500_000 })
      .map((n) => Buffer.from(JSON.stringify({ model: 'm1', prompt: 'x'.repeat(n), stream: false }))),
  },
  {
    weight: 1,
    // Invalid UTF-8 inside a JSON string, and bare.
    arbitrary: fc
      .uint8Array({ minLength: 1, maxLength: 32 })
      .map((b) =>
        Buffer.concat([
          Buffer.from('{"model":"m1","prompt":"'),
          Buffer.from([0xff, 0xc3, 0x28, ...b]),
          Buffer.from('"}'),
        ]),
      ),
  },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)) },
  { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) },
);

/** Percent garbage and odd segments after a real route prefix. */
const path = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom(...ROUTES) },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.constantFrom('/admin/backends/', '/admin/quotas/', '/dashboard/', '/api/', '/v1/', '/', '/admin/'),
        fc.array(
          fc.constantFrom(
            '%',
            '%ZZ',
            '%E0%A4%A',
            '%2F',
            '..',
            '/',
            '//',
            '?',
            '?token=x',
            '#',
            '%00',
            '~',
            'é',
            'x',
            ...PROTO_KEYS,
          ),
          { maxLength: 5 },
        ),
        fc.constantFrom('', '/drain', '/undrain', '?limit=5', '?limit=-1', '?limit=%ZZ'),
      )
      .map(([a, b, c]) => a + b.join('') + c),
  },
  { weight: 1, arbitrary: fc.constantFrom(...ROUTES).map((p) => `${p}?token=${TOKEN}`) },
);

type Framing =
  'length' | 'none' | 'chunked' | 'short' | 'long' | 'badLength' | 'dupLength' | 'both' | 'badChunk';
type Mode = 'full' | 'status' | 'abort';

interface FuzzRequest {
  method: string;
  path: string;
  body: Buffer;
  framing: Framing;
  contentType: string | undefined;
  auth: boolean;
  mode: Mode;
  extra: [string, string][];
}

const request: fc.Arbitrary<FuzzRequest> = fc.record({
  method: fc.constantFrom('POST', 'POST', 'POST', 'GET', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'),
  path,
  body,
  framing: fc.constantFrom<Framing>(
    'length',
    'length',
    'length',
    'length',
    'chunked',
    'chunked',
    'none',
    'short',
    'long',
    'badLength',
    'dupLength',
    'both',
    'badChunk',
  ),
  contentType: fc.constantFrom(
    'application/json',
    'application/json; charset=utf-8',
    'text/plain',
    undefined,
  ),
  auth: fc.boolean(),
  mode: fc.constantFrom<Mode>('full', 'full', 'status', 'abort'),
  extra: fc.array(
    fc
      .tuple(
        fc.constantFrom(
          'x-request-id',
          'x-session-token',
          'x-llmlb-task-id',
          'origin',
          'expect',
          'accept-encoding',
        ),
        fc.oneof(
          fc.constantFrom('', '100-continue', 'http://evil.example', 'x'.repeat(300)),
          fc.string({ maxLength: 12 }).filter((s) => /^[\x20-\x7e]*$/.test(s)),
        ),
      )
      // Any other expectation is a 417 before routing: mostly ask for 100-continue.
      .map(([k, v]) => [k, k === 'expect' && v !== '' ? '100-continue' : v] as [string, string]),
    { maxLength: 2 },
  ),
});

/** Whether the request is framed so that the server must answer it. */
const wellFramed = (q: FuzzRequest): boolean =>
  q.framing === 'length' || q.framing === 'none' || q.framing === 'chunked';

function encode(q: FuzzRequest): Buffer {
  const head = [
    `${q.method} ${q.path} HTTP/1.1`,
    `host: 127.0.0.1:${port}`,
    'connection: close',
    // Short answers keep the run fast (the emulated engine reads this hint).
    'x-llmlb-output-tokens: 3',
  ];
  if (q.auth) head.push(`authorization: Bearer ${TOKEN}`);
  if (q.contentType) head.push(`content-type: ${q.contentType}`);
  for (const [k, v] of q.extra) head.push(`${k}: ${v}`);
  const b = q.body;
  let payload: Buffer = b;
  switch (q.framing) {
    case 'length':
      head.push(`content-length: ${b.length}`);
      break;
    case 'none':
      payload = Buffer.alloc(0);
      break;
    case 'chunked': {
      head.push('transfer-encoding: chunked');
      const parts: Buffer[] = [];
      for (let i = 0; i < b.length; i += 7919) {
        const c = b.subarray(i, i + 7919);
        parts.push(Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n'));
      }
      parts.push(Buffer.from('0\r\n\r\n'));
      payload = Buffer.concat(parts);
      break;
    }
    case 'short':
      head.push(`content-length: ${b.length + 10}`);
      break;
    case 'long':
      head.push(`content-length: ${Math.max(0, b.length - 3)}`);
      break;
    case 'badLength':
      head.push(`content-length: ${['-1', 'abc', '1e3', '0x10', ' ', '99999999999999999999'][b.length % 6]}`);
      break;
    case 'dupLength':
      head.push(`content-length: ${b.length}`, `content-length: ${b.length + 1}`);
      break;
    case 'both':
      head.push(`content-length: ${b.length}`, 'transfer-encoding: chunked');
      break;
    case 'badChunk':
      head.push('transfer-encoding: chunked');
      payload = Buffer.concat([Buffer.from('zz\r\n'), b, Buffer.from('\r\n0\r\n\r\n')]);
      break;
  }
  return Buffer.concat([Buffer.from(head.join('\r\n') + '\r\n\r\n', 'latin1'), payload]);
}

/** Sends raw bytes; the status line's code, 'none' if the server closed without one. */
function send(q: FuzzRequest): Promise<number | 'none' | 'timeout'> {
  return new Promise((resolve) => {
    const sock = connect(port, '127.0.0.1');
    let head = '';
    let status: number | undefined;
    let settled = false;
    const finish = (v: number | 'none' | 'timeout'): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => finish(status ?? 'timeout'), ANSWER_MS);
    sock.on('data', (d: Buffer) => {
      if (status !== undefined) return;
      head += d.toString('latin1');
      // Skip interim answers (100 Continue for `expect`).
      let m = /^HTTP\/1\.[01] (\d{3}) /.exec(head);
      while (m && m[1]!.startsWith('1') && head.includes('\r\n\r\n')) {
        head = head.slice(head.indexOf('\r\n\r\n') + 4);
        m = /^HTTP\/1\.[01] (\d{3}) /.exec(head);
      }
      if (m && !m[1]!.startsWith('1')) {
        status = Number(m[1]);
        if (q.mode === 'status') finish(status);
      }
    });
    sock.on('close', () => finish(status ?? 'none'));
    sock.on('error', () => finish(status ?? 'none'));
    sock.write(encode(q), () => {
      // Node takes a half-close for a client that left (its answer is dropped): only requests
      // framed to leave the server waiting for more bytes end their side.
      if (q.mode !== 'abort' && !wellFramed(q)) sock.end();
    });
    if (q.mode === 'abort') setTimeout(() => finish('none'), Math.floor(Math.random() * 30));
  });
}

/** 2xx–4xx, or the upstream conditions the API documents (502 bad gateway, 503 no capacity, 504 timeout). */
const acceptable = (s: number): boolean => (s >= 200 && s < 500) || s === 502 || s === 503 || s === 504;

test('fuzzed requests on every public route: only 4xx or documented 5xx, nothing hangs, nothing leaks', async (t) => {
  const started = Date.now();
  const seen = new Map<number | string, number>();
  let crashed: unknown;
  const onCrash = (err: unknown): void => {
    crashed = err;
  };
  process.on('uncaughtException', onCrash);
  process.on('unhandledRejection', onCrash);
  try {
    // fc.check, not fc.assert: a counterexample holds megabytes of body; report our message only.
    const run = await fc.check(
      fc.asyncProperty(fc.array(request, { minLength: 1, maxLength: 6 }), async (batch) => {
        const out = await Promise.all(batch.map(send));
        out.forEach((s, i) => {
          const q = batch[i]!;
          seen.set(s, (seen.get(s) ?? 0) + 1);
          const what = `${q.method} ${q.path} framing=${q.framing} mode=${q.mode} ct=${q.contentType} body[${q.body.length}]=${q.body.subarray(0, 120).toString('latin1')}`;
          if (typeof s === 'number') assert.ok(acceptable(s), `status ${s} for ${what}`);
          else if (q.mode !== 'abort' && wellFramed(q)) assert.fail(`no answer (${s}) for ${what}`);
        });
        assert.equal(crashed, undefined, `the router threw: ${String(crashed)}`);
      }),
      { numRuns: 1500, interruptAfterTimeLimit: FUZZ_MS, markInterruptAsFailure: false, endOnFailure: true },
    );
    if (run.failed) {
      const e = run.errorInstance;
      assert.fail(`seed ${run.seed}: ${(e instanceof Error ? e.message : String(e)).slice(0, 1500)}`);
    }
    // Everything taken was given back: slots, queue, quota leases.
    await waitFor(
      () => r.scheduler.backendViews().every((b) => b.inFlight === 0) && r.scheduler.queueLength === 0,
      15_000,
      'in-flight slots and queue back to 0',
    );
    let leases = -1;
    const until = Date.now() + 10_000;
    while (Date.now() < until) {
      leases = (await r.admission.store.snapshot()).reduce((a, m) => a + m.inFlight, 0);
      if (leases === 0) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    assert.equal(leases, 0, 'quota leases back to 0');
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(health.status, 200);
    assert.equal(crashed, undefined);
  } finally {
    process.off('uncaughtException', onCrash);
    process.off('unhandledRejection', onCrash);
  }
  const total = [...seen.values()].reduce((a, b) => a + b, 0);
  t.diagnostic(
    `${total} requests in ${Date.now() - started} ms; answers: ${[...seen].map(([k, n]) => `${k}×${n}`).join(' ')}`,
  );
  assert.ok(total >= 50, `only ${total} requests in ${Date.now() - started} ms`);
  assert.ok(Date.now() - started < 60_000, 'bounded to 60 s');
});
