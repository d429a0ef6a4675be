import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { parseBackendEntry } from '../src/config/load.js';
import { Router, type RouterSettings } from '../src/proxy/router.js';
import { loadRouterConfig, watchConfig } from '../src/commands/serve.js';
import { backend, engine, post, settings, waitFor } from './helpers.js';

const CLI = ['--import', 'tsx', 'src/cli.ts'];
/** Short answers: the emulated engine reads the output length from this header. */
const SHORT = { 'x-llmlb-output-tokens': '4' };

/** A logger whose lines a test can read. */
function capturedLogger(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n'))
        if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { log: pino({ level: 'info' }, sink), lines };
}

async function start(s: RouterSettings, log: Logger): Promise<{ router: Router; url: string }> {
  const router = new Router(s, log, Math.random, parseBackendEntry);
  return { router, url: await router.listen('127.0.0.1', 0) };
}

/** A reverse proxy that serves `target` under `prefix` only (a backend behind a path). */
async function prefixProxy(
  prefix: string,
  target: string,
): Promise<{ url: string; server: Server; seen: string[] }> {
  const seen: string[] = [];
  const t = new URL(target);
  const server = createServer((req, res) => {
    seen.push(req.url ?? '');
    if (!req.url?.startsWith(prefix + '/')) {
      res.writeHead(404).end('not here');
      return;
    }
    const up = httpRequest(
      {
        host: t.hostname,
        port: t.port,
        path: req.url.slice(prefix.length),
        method: req.method,
        headers: req.headers,
      },
      (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers);
        ur.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return { url: `http://127.0.0.1:${port}`, server, seen };
}

test('a /v1 base URL (api: openai) and a path-prefixed URL work end to end', async () => {
  const e = await engine({ api: 'both', models: ['m1'] });
  const px = await prefixProxy('/ollama', e.url);
  const { log } = capturedLogger();
  const { router, url } = await start(
    settings([
      backend('vllm', `${e.url}/v1/`, { api: 'openai', models: undefined }),
      backend('behind', `${px.url}/ollama`, { models: undefined }),
    ]),
    log,
  );
  try {
    await waitFor(() => router.scheduler.backendViews().every((b) => b.healthy && b.models.has('m1')));
    const seen = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const r = await post(
        `${url}/v1/chat/completions`,
        { model: 'm1', messages: [{ role: 'user', content: 'hi' }] },
        SHORT,
      );
      assert.equal(r.status, 200, await r.clone().text());
      seen.add(r.headers.get('x-llmlb-backend') ?? '');
      await r.arrayBuffer();
      const g = await post(`${url}/api/generate`, { model: 'm1', prompt: 'x', stream: false }, SHORT);
      assert.equal(g.status, 200);
      seen.add(g.headers.get('x-llmlb-backend') ?? '');
      await g.arrayBuffer();
    }
    assert.deepEqual([...seen].sort(), ['behind', 'vllm']);
    // Everything the router sent the prefixed backend went under its prefix.
    assert.ok(px.seen.length > 0);
    assert.deepEqual(
      px.seen.filter((p) => !p.startsWith('/ollama/')),
      [],
    );
  } finally {
    await router.close();
    px.server.close();
    await e.close();
  }
});

test('serve with a bad backend URL exits 2 with one line naming the backend', () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-fleet-'));
  for (const bad of ['http://h:8000/v1?key=1', 'http://user:pw@h:8000/v1']) {
    const p = join(dir, 'bad.yaml');
    writeFileSync(
      p,
      `backends:\n  - { name: good, url: "http://127.0.0.1:1" }\n  - { name: vllm, url: "${bad}", api: openai }\n`,
    );
    const r = spawnSync(process.execPath, [...CLI, 'serve', '--config', p, '--port', '0'], {
      encoding: 'utf8',
    });
    assert.equal(r.status, 2, `${bad}: ${r.stderr}`);
    const lines = r.stderr.trim().split('\n');
    assert.ok(lines.length <= 2, r.stderr); // the file, then the problem: no stack trace
    assert.doesNotMatch(r.stderr, /\n\s+at /);
    assert.match(r.stderr, /backends\[1\]\.url/);
  }
});

test('POST /admin/backends: a bad URL is a 400 in the API error format, a /v1 URL is added and works', async () => {
  const e = await engine({ api: 'both', models: ['m1'] });
  const { log } = capturedLogger();
  const { router, url } = await start(settings([backend('a', e.url)], { admin: { token: 't' } }), log);
  const add = (body: unknown): Promise<Response> =>
    post(`${url}/admin/backends`, body, { authorization: 'Bearer t' });
  try {
    for (const bad of ['http://h:1/v1?x=1', 'http://u:p@h:1/', 'file:///etc/passwd', 'nope']) {
      const r = await add({ name: 'b', url: bad, api: 'openai' });
      assert.equal(r.status, 400, bad);
      const body = (await r.json()) as { error: { message: string } };
      assert.match(body.error.message, /url/);
    }
    const ok = await add({ name: 'b', url: `${e.url}/v1`, api: 'openai' });
    assert.equal(ok.status < 300, true, await ok.clone().text());
    await waitFor(() => router.scheduler.backend('b')?.healthy === true);
    const rt = router.fleet.get('b');
    assert.equal(rt?.basePath, '');
  } finally {
    await router.close();
    await e.close();
  }
});

test('an unreachable backend without models: logged, 503 (not 404) in each API format, /readyz 503', async () => {
  const { log, lines } = capturedLogger();
  const { router, url } = await start(
    settings([backend('gone', 'http://127.0.0.1:1', { models: undefined })]),
    log,
  );
  try {
    const down = lines.filter((l) => l.msg === 'backend unreachable' && l.backend === 'gone');
    assert.equal(down.length, 1, JSON.stringify(lines));
    assert.equal(down[0]!.level, 40); // warn
    assert.match(String(down[0]!.reason), /ECONNREFUSED|connect/);

    const o = await post(`${url}/v1/chat/completions`, {
      model: 'm1',
      messages: [{ role: 'user', content: 'x' }],
    });
    assert.equal(o.status, 503);
    const oe = (await o.json()) as { error: { message: string; code: string } };
    assert.equal(oe.error.code, 'model_unavailable');
    assert.match(oe.error.message, /discovery has not succeeded on backend gone/);
    const g = await post(`${url}/api/generate`, { model: 'm1', prompt: 'x' });
    assert.equal(g.status, 503);
    const ge = (await g.json()) as { error: unknown };
    assert.equal(typeof ge.error, 'string'); // Ollama's shape

    const ready = await fetch(`${url}/readyz`);
    assert.equal(ready.status, 503);
    assert.deepEqual(await ready.json(), { ready: false, healthyBackends: 0, backends: 1 });
    const h = await fetch(`${url}/healthz`);
    assert.equal(h.status, 200);
    const hb = (await h.json()) as Record<string, unknown>;
    assert.equal(hb.ready, false);
    assert.deepEqual(hb.unhealthy, ['gone']);
    assert.deepEqual(hb.undiscovered, ['gone']);
    // Failed probes go on (every 100 ms) without a line each: one per state change.
    await new Promise((r) => setTimeout(r, 350));
    assert.equal(lines.filter((l) => l.backend === 'gone' && l.level === 40).length, 1);
  } finally {
    await router.close();
  }
});

test('a backend going down and coming back is logged each time; /readyz follows', async () => {
  const e = await engine();
  const port = Number(new URL(e.url).port);
  const { log, lines } = capturedLogger();
  const { router, url } = await start(settings([backend('a', e.url, { models: undefined })]), log);
  let e2: Awaited<ReturnType<typeof engine>> | undefined;
  try {
    await waitFor(() => router.scheduler.backend('a')?.healthy === true);
    assert.ok(lines.some((l) => l.msg === 'backend models discovered' && l.backend === 'a'));
    assert.equal((await fetch(`${url}/readyz`)).status, 200);
    await e.close();
    await waitFor(() => lines.some((l) => l.msg === 'backend unreachable'), 5000, 'down line');
    await waitFor(() => router.scheduler.backend('a')?.healthy === false, 5000, 'ejected');
    assert.equal((await fetch(`${url}/readyz`)).status, 503);
    // Its models are known: a request is 503 (no healthy backend), not 404.
    const r = await post(`${url}/api/generate`, { model: 'm1', prompt: 'x' });
    assert.equal(r.status, 503);
    await r.arrayBuffer();
    e2 = await engine({ port });
    await waitFor(() => router.scheduler.backend('a')?.healthy === true, 5000, 'back');
    assert.ok(lines.some((l) => l.msg === 'backend healthy' && l.backend === 'a'));
    const ok = await fetch(`${url}/readyz`);
    assert.deepEqual(await ok.json(), { ready: true, healthyBackends: 1, backends: 1 });
  } finally {
    await router.close();
    await e2?.close();
  }
});

test('a backend on the other API is logged with a hint to set `api:`', async () => {
  const vllm = await engine({ api: 'openai' });
  // Ollama-API only (real Ollama also answers /v1): /api/tags and nothing else.
  const tagsOnly = createServer((req, res) => {
    if (req.url === '/api/tags')
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"models":[]}');
    else res.writeHead(404).end('{"detail":"Not Found"}');
  });
  await new Promise<void>((r) => tagsOnly.listen(0, '127.0.0.1', r));
  const addr = tagsOnly.address();
  const tagsUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  const { log, lines } = capturedLogger();
  const { router } = await start(
    settings([
      backend('vllm', vllm.url, { models: undefined }), // api left out: ollama
      backend('vllm-v1', `${vllm.url}/v1`, { models: undefined }), // the usual vLLM base URL, api left out
      backend('olla', tagsUrl, { api: 'openai', models: ['m1'] }),
    ]),
    log,
  );
  try {
    const warn = (name: string) => lines.find((l) => l.backend === name && l.level === 40);
    assert.equal(warn('vllm')?.hint, 'answers the OpenAI API; set `api: openai`');
    assert.match(
      String(warn('vllm')?.msg),
      /^backend probe failed; answers the OpenAI API; set `api: openai`$/,
    );
    assert.equal(warn('vllm-v1')?.hint, 'answers the OpenAI API; set `api: openai`');
    assert.equal(warn('olla')?.hint, 'answers the Ollama API; set `api: ollama`');
    assert.match(String(router.fleet.get('vllm')?.problem), /answered 404; answers the OpenAI API/);
  } finally {
    await router.close();
    await vllm.close();
    tagsOnly.close();
  }
});

test('/api/show answers the same over a mixed fleet, and from OpenAI-API backends alone', async () => {
  const model = 'llama3.1-8b';
  const ollama = await engine({ api: 'ollama', models: [model] });
  const vllmA = await engine({ api: 'openai', models: [model] });
  const vllmB = await engine({ api: 'openai', models: [model] });
  const { log } = capturedLogger();
  const mixed = await start(
    settings([
      backend('vllm-a', vllmA.url, { api: 'openai', models: [model] }),
      backend('olla', ollama.url, { models: [model] }),
      backend('vllm-b', vllmB.url, { api: 'openai', models: [model] }),
    ]),
    log,
  );
  const openaiOnly = await start(
    settings([
      backend('vllm-a', vllmA.url, { api: 'openai', models: [model] }),
      backend('vllm-b', vllmB.url, { api: 'openai', models: [model] }),
    ]),
    log,
  );
  const show = async (url: string): Promise<{ body: string; backend: string | null }> => {
    const r = await post(`${url}/api/show`, { model });
    assert.equal(r.status, 200);
    return { body: await r.text(), backend: r.headers.get('x-llmlb-backend') };
  };
  try {
    for (const x of [mixed, openaiOnly])
      await waitFor(() => x.router.scheduler.backendViews().every((b) => b.healthy));
    // Concurrent calls too: with the least-connections policy they would spread over every backend.
    const answers = [
      ...(await Promise.all([1, 2, 3, 4].map(() => show(mixed.url)))),
      ...(await Promise.all([1, 2, 3, 4].map(() => show(mixed.url)))),
    ];
    assert.deepEqual(new Set(answers.map((a) => a.backend)), new Set(['olla']));
    assert.equal(new Set(answers.map((a) => a.body)).size, 1);
    const native = JSON.parse(answers[0]!.body) as { model_info: Record<string, unknown> };
    assert.equal(native.model_info['llama.context_length'], 8192);

    const synth = await Promise.all([1, 2, 3, 4, 5, 6].map(() => show(openaiOnly.url)));
    assert.deepEqual(new Set(synth.map((a) => a.backend)), new Set(['vllm-a', 'vllm-b']));
    assert.equal(new Set(synth.map((a) => a.body)).size, 1);
    const o = JSON.parse(synth[0]!.body) as {
      model_info: Record<string, unknown>;
      details: Record<string, unknown>;
    };
    assert.equal(o.model_info['general.context_length'], 8192);
    assert.equal(o.model_info['llama.context_length'], 8192);
    assert.equal(o.details.family, 'llama');
    assert.equal(o.details.parameter_size, '8B');
  } finally {
    await mixed.router.close();
    await openaiOnly.router.close();
    await Promise.all([ollama.close(), vllmA.close(), vllmB.close()]);
  }
});

test('reload: a bad backend URL is one line and the running config stays; a /v1 URL is added', async () => {
  const e = await engine();
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-fleet-'));
  const file = join(dir, 'llmlb.yaml');
  const yaml = (extra: string): string =>
    `server: { port: 0 }\nlog: { level: info }\nbackends:\n  - { name: a, url: "${e.url}", models: [m1] }\n${extra}`;
  writeFileSync(file, yaml(''));
  const { log, lines } = capturedLogger();
  const { router } = await start(loadRouterConfig(file, {}), log);
  const unwatch = watchConfig(file, {}, router, log);
  try {
    writeFileSync(file, yaml(`  - { name: v, url: "http://u:p@127.0.0.1:1/v1", api: openai }\n`));
    await waitFor(
      () => lines.some((l) => l.msg === 'config reload rejected; keeping the running config'),
      5000,
    );
    const rejected = lines.find((l) => l.msg === 'config reload rejected; keeping the running config')!;
    assert.match(String(rejected.reason), /backends\[1\]\.url/);
    assert.equal(rejected.err, undefined); // no stack
    assert.equal(router.fleet.get('v'), undefined);
    writeFileSync(file, yaml(`  - { name: v, url: "${e.url}/v1", api: openai }\n`));
    await waitFor(() => router.scheduler.backend('v')?.healthy === true, 5000, 'v added');
    assert.equal(router.fleet.get('v')?.basePath, '');
    assert.ok(router.scheduler.backend('v')?.models.has('m1'));
  } finally {
    unwatch();
    await router.close();
    await e.close();
  }
});
