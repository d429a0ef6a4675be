/**
 * Issue 16, the trust defects: prototype-named keys, the admin API closed by default (token,
 * separate listener, CSRF, content type), 4xx for malformed paths, a pinned policy's backend
 * checked against the fleet. Real engines, a real router, real HTTP.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import type { EngineServer } from '../src/engine/server.js';
import { parseBackendEntry } from '../src/config/load.js';
import { silentLogger } from '../src/log.js';
import { Router, type RouterSettings } from '../src/proxy/router.js';
import { backend, engine, post, settings } from './helpers.js';

const TOKEN = 's3cret-token';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const QUOTA = { weight: 1, maxConcurrent: 2, tokensPerMinute: 1_000_000, requestsPerMinute: 10_000 };

async function start(s: RouterSettings): Promise<{ r: Router; url: string }> {
  const r = new Router(s, silentLogger(), Math.random, parseBackendEntry);
  return { r, url: await r.listen('127.0.0.1', 0) };
}

async function call(
  url: string,
  method: string,
  body?: unknown,
  headers: Record<string, string> = AUTH,
): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** A raw request (fetch refuses to send some headers, e.g. a Host of our choosing). */
function raw(
  url: string,
  method: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('admin closed by default', () => {
  let e: EngineServer;
  let r: Router;
  let url: string;
  before(async () => {
    e = await engine();
    ({ r, url } = await start(settings([backend('a', e.url)], { quotas: { models: { m1: QUOTA } } })));
  });
  after(async () => {
    await r.close();
    await e.close();
  });

  test('every admin route answers 403 saying how to open it, and nothing changes', async () => {
    const routes: [string, string, unknown?][] = [
      ['GET', '/admin/backends'],
      ['POST', '/admin/backends', { name: 'evil', url: 'http://127.0.0.1:9' }],
      ['PATCH', '/admin/backends/a', { weight: 5 }],
      ['POST', '/admin/backends/a/drain'],
      ['DELETE', '/admin/backends/a'],
      ['PUT', '/admin/policy', { policy: 'round-robin' }],
      ['GET', '/admin/decisions'],
      ['GET', '/admin/quotas'],
      ['PATCH', '/admin/quotas/m1', { maxConcurrent: 0 }],
      ['GET', '/admin/nope'],
      ['GET', '/admin'],
    ];
    for (const [method, path, body] of routes) {
      // Even a correct-looking bearer token opens nothing when none is configured.
      const res = await call(url + path, method, body, AUTH);
      assert.equal(res.status, 403, `${method} ${path}`);
      const err = (JSON.parse(res.text) as { error: { message: string; type: string; code: string } }).error;
      assert.equal(err.code, 'admin_closed');
      assert.match(err.message, /admin\.token/);
      assert.match(err.message, /admin\.listen/);
    }
    const b = r.scheduler.backend('a')!;
    assert.deepEqual([b.weight, b.draining, r.scheduler.policyName], [1, false, 'least-connections']);
    assert.equal(r.fleet.all().length, 1);
    assert.equal((await r.admission.store.snapshot())[0]!.limits.maxConcurrent, 2);
  });

  test('the dashboard event stream stays open without a token (nothing to check it against)', async () => {
    const ac = new AbortController();
    const res = await fetch(`${url}/dashboard/events`, { signal: ac.signal });
    assert.equal(res.status, 200);
    ac.abort();
  });
});

describe('admin with a token on the client port', () => {
  let e: EngineServer;
  let e2: EngineServer;
  let r: Router;
  let url: string;
  before(async () => {
    [e, e2] = await Promise.all([engine(), engine()]);
    ({ r, url } = await start(
      settings([backend('a', e.url), backend('b', e2.url)], {
        admin: { token: TOKEN },
        quotas: { models: { m1: QUOTA } },
      }),
    ));
  });
  after(async () => {
    await r.close();
    await Promise.all([e.close(), e2.close()]);
  });

  test('Bearer in any case and spacing; a wrong, missing or differently long token is 401', async () => {
    for (const h of [`Bearer ${TOKEN}`, `bearer ${TOKEN}`, `BEARER   ${TOKEN}`, ` Bearer ${TOKEN} `])
      assert.equal(
        (await call(`${url}/admin/backends`, 'GET', undefined, { authorization: h })).status,
        200,
        h,
      );
    for (const h of ['', `Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(1)}`, `Basic ${TOKEN}`, TOKEN, 'Bearer']) {
      const res = await call(`${url}/admin/backends`, 'GET', undefined, h ? { authorization: h } : {});
      assert.equal(res.status, 401, h);
      assert.equal(res.headers.get('www-authenticate'), 'Bearer');
    }
  });

  test('changes need application/json (415 for text/plain, forms, none), nothing changes', async () => {
    const add = JSON.stringify({ name: 'evil', url: 'http://127.0.0.1:9' });
    for (const ct of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      assert.equal(
        (await call(`${url}/admin/backends`, 'POST', add, { ...AUTH, 'content-type': ct })).status,
        415,
        ct,
      );
      assert.equal(
        (await call(`${url}/admin/backends/a`, 'PATCH', '{"weight":9}', { ...AUTH, 'content-type': ct }))
          .status,
        415,
      );
      assert.equal(
        (
          await call(`${url}/admin/quotas/m1`, 'PATCH', '{"maxConcurrent":0}', {
            ...AUTH,
            'content-type': ct,
          })
        ).status,
        415,
      );
      assert.equal(
        (await call(`${url}/admin/policy`, 'PUT', '{"policy":"random"}', { ...AUTH, 'content-type': ct }))
          .status,
        415,
      );
    }
    assert.equal((await raw(`${url}/admin/backends`, 'POST', AUTH, add)).status, 415, 'no content type');
    assert.equal(r.fleet.all().length, 2);
    assert.equal(r.scheduler.backend('a')!.weight, 1);
    assert.equal((await r.admission.store.snapshot())[0]!.limits.maxConcurrent, 2);
    // application/json with parameters is fine.
    const ok = await call(`${url}/admin/backends/a`, 'PATCH', '{"weight":2}', {
      ...AUTH,
      'content-type': 'Application/JSON; charset=utf-8',
    });
    assert.equal(ok.status, 200);
    await call(`${url}/admin/backends/a`, 'PATCH', { weight: 1 });
  });

  test('cross-site browser requests are refused even with the token', async () => {
    for (const h of [
      { origin: 'http://evil.example' },
      { 'sec-fetch-site': 'cross-site' },
      { origin: 'null' },
    ] as Record<string, string>[]) {
      const res = await call(`${url}/admin/backends/a/drain`, 'POST', undefined, { ...AUTH, ...h });
      assert.equal(res.status, 403, JSON.stringify(h));
      assert.match(res.text, /cross_site/);
    }
    assert.equal(r.scheduler.backend('a')!.draining, false);
    // Same origin is fine (a page served by the router itself).
    const same = await call(`${url}/admin/backends/a/drain`, 'POST', undefined, {
      ...AUTH,
      origin: url,
      'sec-fetch-site': 'same-origin',
    });
    assert.equal(same.status, 200);
    assert.equal((await call(`${url}/admin/backends/a/undrain`, 'POST')).status, 200);
  });

  test('dashboard events need the token (bearer or ?token=); the page itself does not', async () => {
    assert.equal((await fetch(`${url}/dashboard`)).status, 200);
    const no = await fetch(`${url}/dashboard/events`);
    assert.equal(no.status, 401);
    await no.arrayBuffer();
    assert.equal((await fetch(`${url}/dashboard/events?token=wrong`)).status, 401);
    for (const init of [
      { path: `/dashboard/events?token=${TOKEN}` },
      { path: '/dashboard/events', headers: AUTH },
    ]) {
      const ac = new AbortController();
      const res = await fetch(url + init.path, { headers: init.headers ?? {}, signal: ac.signal });
      assert.equal(res.status, 200, init.path);
      ac.abort();
    }
  });

  test('malformed percent-encoding in admin paths is 400, not 5xx', async () => {
    for (const [method, path, body] of [
      ['PATCH', '/admin/backends/%ZZ', { weight: 2 }],
      ['DELETE', '/admin/backends/%ZZ', undefined],
      ['POST', '/admin/backends/%E0%A4%A/drain', undefined],
      ['PATCH', '/admin/quotas/%ZZ', { maxConcurrent: 1 }],
      ['PATCH', '/admin/quotas/%', { maxConcurrent: 1 }],
    ] as const) {
      const res = await call(url + path, method, body);
      assert.equal(res.status, 400, `${method} ${path}: ${res.text}`);
      assert.match(res.text, /percent-encoding/);
    }
  });

  test('a pinned policy must name a backend of the fleet (both body shapes); its backend cannot be removed', async () => {
    for (const body of [
      { name: 'pinned', backend: 'nope' },
      { policy: { name: 'pinned', backend: 'nope' } },
    ]) {
      const res = await call(`${url}/admin/policy`, 'PUT', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(res.text, /unknown backend 'nope'/);
    }
    assert.equal(r.scheduler.policyName, 'least-connections');
    assert.equal((await call(`${url}/admin/policy`, 'PUT', { name: 'pinned', backend: 'b' })).status, 200);
    assert.equal(r.scheduler.policyName, 'pinned');
    const g = await post(`${url}/api/generate`, { model: 'm1', prompt: 'x', stream: false });
    assert.equal(g.status, 200);
    assert.equal(g.headers.get('x-llmlb-backend'), 'b');
    await g.arrayBuffer();
    const del = await call(`${url}/admin/backends/b`, 'DELETE');
    assert.equal(del.status, 409);
    assert.match(del.text, /pinned/);
    assert.equal((await call(`${url}/admin/policy`, 'PUT', { policy: 'least-connections' })).status, 200);
  });

  test('prototype keys: PATCH /admin/quotas/__proto__ is 404 and breaks nothing after it', async () => {
    for (const model of ['__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty']) {
      const res = await call(`${url}/admin/quotas/${model}`, 'PATCH', QUOTA);
      assert.equal(res.status, 404, `${model}: ${res.text}`);
    }
    assert.equal(({} as Record<string, unknown>).limits, undefined, 'Object.prototype untouched');
    // /schedule still works, unknown prototype-named models are 404 (not 503).
    const s = await post(`${url}/schedule`, { estimated_tokens: 10, model: 'm1' });
    assert.equal(s.status, 200);
    const { task_id } = (await s.json()) as { task_id: string };
    assert.equal((await post(`${url}/complete`, { task_id })).status, 200);
    for (const model of ['constructor', 'toString', '__proto__', 'valueOf']) {
      const res = await post(`${url}/schedule`, { estimated_tokens: 10, model });
      assert.equal(res.status, 404, model);
      await res.arrayBuffer();
    }
    // Quota-gated proxying still works; prototype-named models are unknown models.
    const g = await post(`${url}/api/generate`, { model: 'm1', prompt: 'x', stream: false });
    assert.equal(g.status, 200);
    await g.arrayBuffer();
    for (const model of ['constructor', 'toString', '__proto__']) {
      const res = await post(`${url}/v1/chat/completions`, {
        model,
        messages: [{ role: 'user', content: 'x' }],
      });
      assert.equal(res.status, 404, model);
      await res.arrayBuffer();
    }
    const m = await fetch(`${url}/metrics`);
    assert.equal(m.status, 200);
    assert.match(await m.text(), /llmlb_quota_max_concurrent\{model="m1"\} 2/);
    assert.equal((await fetch(`${url}/healthz`)).status, 200);
  });

  test('backends and models named like Object.prototype members work', async () => {
    const names = ['__proto__', 'constructor', 'toString'];
    const e3 = await engine({ models: ['m1', 'constructor', 'toString'] });
    for (const name of names) {
      const res = await call(`${url}/admin/backends`, 'POST', {
        name,
        url: e3.url,
        models: [name === '__proto__' ? 'm1' : name],
      });
      assert.equal(res.status, 201, `${name}: ${res.text}`);
    }
    try {
      assert.equal(({} as Record<string, unknown>).url, undefined, 'Object.prototype untouched');
      assert.equal((await call(`${url}/admin/backends/constructor`, 'PATCH', { weight: 2 })).status, 200);
      assert.equal(r.scheduler.backend('constructor')!.weight, 2);
      const res = await post(`${url}/api/generate`, { model: 'toString', prompt: 'x', stream: false });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-llmlb-backend'), 'toString');
      await res.arrayBuffer();
      assert.equal((await call(`${url}/admin/backends/__proto__/drain`, 'POST')).status, 200);
      assert.equal(r.scheduler.backend('__proto__')!.draining, true);
      const m = await fetch(`${url}/metrics`);
      assert.equal(m.status, 200);
      await m.arrayBuffer();
    } finally {
      for (const name of names) await call(`${url}/admin/backends/${name}`, 'DELETE');
      await e3.close();
    }
    assert.equal(r.fleet.all().length, 2);
  });
});

describe('admin.listen: a second listener', () => {
  let e: EngineServer;
  let r: Router;
  let url: string;
  let adminUrl: string;
  before(async () => {
    e = await engine();
    ({ r, url } = await start(
      settings([backend('a', e.url)], { admin: { listen: { host: '127.0.0.1', port: 0 } } }),
    ));
    adminUrl = r.adminUrl!;
  });
  after(async () => {
    await r.close();
    await e.close();
  });

  test('admin is served only there (no token needed on loopback); the client port refuses it', async () => {
    assert.notEqual(adminUrl, url);
    assert.equal((await call(`${adminUrl}/admin/backends`, 'GET', undefined, {})).status, 200);
    const there = await call(`${url}/admin/backends`, 'GET', undefined, {});
    assert.equal(there.status, 403);
    assert.match(there.text, /admin\.listen/);
    // The admin listener serves no client routes.
    assert.equal((await post(`${adminUrl}/api/generate`, { model: 'm1', prompt: 'x' })).status, 404);
    assert.equal((await fetch(`${adminUrl}/healthz`)).status, 200);
    assert.equal((await fetch(`${adminUrl}/metrics`)).status, 200);
  });

  test('without a token: cross-site requests and rebinding-style Host names are refused', async () => {
    const drain = `${adminUrl}/admin/backends/a/drain`;
    assert.equal((await call(drain, 'POST', undefined, { origin: 'http://evil.example' })).status, 403);
    const host = new URL(adminUrl).host;
    assert.equal((await raw(drain, 'POST', { host: `evil.example:${new URL(adminUrl).port}` })).status, 403);
    assert.equal(r.scheduler.backend('a')!.draining, false);
    assert.equal((await raw(drain, 'POST', { host })).status, 200);
    assert.equal(
      (await raw(`${adminUrl}/admin/backends/a/undrain`, 'POST', { host: 'localhost' })).status,
      200,
    );
  });

  test('close() closes the admin listener too', async () => {
    const e2 = await engine();
    const { r: r2 } = await start(
      settings([backend('a', e2.url)], { admin: { token: TOKEN, listen: { host: '127.0.0.1', port: 0 } } }),
    );
    const au = r2.adminUrl!;
    assert.equal((await call(`${au}/admin/backends`, 'GET', undefined, {})).status, 401);
    assert.equal((await call(`${au}/admin/backends`, 'GET')).status, 200);
    await r2.close();
    await e2.close();
    await assert.rejects(fetch(`${au}/admin/backends`, { headers: AUTH }));
  });
});
