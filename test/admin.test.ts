import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { EngineServer } from '../src/engine/server.js';
import { silentLogger } from '../src/log.js';
import { Router } from '../src/proxy/router.js';
import { parseBackendEntry } from '../src/config/load.js';
import { backend, engine, fastProfile, post, settings, waitFor } from './helpers.js';

interface State {
  policy: string;
  backends: {
    name: string;
    weight: number;
    maxConcurrency: number | null;
    draining: boolean;
    inFlight: number;
  }[];
}

describe('admin API', () => {
  let a: EngineServer;
  let b: EngineServer;
  let c: EngineServer;
  let r: Router;
  let url: string;
  const auth = { authorization: 'Bearer s3cret' };
  const call = async (
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = auth,
  ) => {
    const res = await fetch(url + path, {
      method,
      headers: { 'content-type': 'application/json', ...headers },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    return { status: res.status, json: (await res.json()) as unknown };
  };
  const state = async (): Promise<State> => (await call('GET', '/admin/backends')).json as State;

  before(async () => {
    a = await engine({ profile: fastProfile({ baseStepS: 0.01 }) });
    b = await engine();
    c = await engine();
    r = new Router(
      settings([backend('a', a.url), backend('b', b.url)], { admin: { token: 's3cret' } }),
      silentLogger(),
      Math.random,
      parseBackendEntry,
    );
    url = await r.listen('127.0.0.1', 0);
  });
  after(async () => {
    await r.close();
    await Promise.all([a.close(), b.close(), c.close()]);
  });

  test('401 without the bearer token, nothing changed', async () => {
    const res = await call('GET', '/admin/backends', undefined, {});
    assert.equal(res.status, 401);
    const patch = await call('PATCH', '/admin/backends/a', { weight: 9 }, { authorization: 'Bearer wrong' });
    assert.equal(patch.status, 401);
    assert.equal((await state()).backends.find((x) => x.name === 'a')?.weight, 1);
  });

  test('patch weights and caps; invalid patches are 400 and change nothing', async () => {
    assert.equal((await call('PATCH', '/admin/backends/a', { weight: 3, maxConcurrency: 2 })).status, 200);
    let s = await state();
    assert.deepEqual([s.backends[0]?.weight, s.backends[0]?.maxConcurrency], [3, 2]);
    for (const bad of [{ weight: -1 }, { maxConcurrency: 1.5 }, { nope: 1 }, '{broken']) {
      const res = await call('PATCH', '/admin/backends/a', bad);
      assert.equal(res.status, 400, JSON.stringify(bad));
      assert.ok((res.json as { error: { message: string } }).error.message);
    }
    s = await state();
    assert.deepEqual([s.backends[0]?.weight, s.backends[0]?.maxConcurrency], [3, 2]);
    assert.equal((await call('PATCH', '/admin/backends/ghost', { weight: 1 })).status, 404);
    assert.equal((await call('PATCH', '/admin/backends/a', { maxConcurrency: null })).status, 200);
    assert.equal((await state()).backends[0]?.maxConcurrency, null);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /llmlb_backend_in_flight\{backend="a"\} 0/);
  });

  test('drain stops new requests while in-flight ones finish', async () => {
    const slow = post(
      `${url}/api/generate`,
      { model: 'm1', prompt: 'x', stream: false },
      { 'x-llmlb-output-tokens': '30' },
    );
    await waitFor(
      () => (r.scheduler.backend('a')?.inFlight ?? 0) + (r.scheduler.backend('b')?.inFlight ?? 0) === 1,
      2000,
      'push',
    );
    const busy = r.scheduler.backend('a')?.inFlight === 1 ? 'a' : 'b';
    assert.equal((await call('POST', `/admin/backends/${busy}/drain`)).status, 200);
    assert.equal((await state()).backends.find((x) => x.name === busy)?.draining, true);
    for (let i = 0; i < 4; i++) {
      const res = await post(
        `${url}/api/generate`,
        { model: 'm1', prompt: 'y', stream: false },
        { 'x-llmlb-output-tokens': '2' },
      );
      assert.notEqual(res.headers.get('x-llmlb-backend'), busy);
      await res.arrayBuffer();
    }
    const first = await slow;
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('x-llmlb-backend'), busy);
    await first.arrayBuffer();
    assert.equal((await call('POST', `/admin/backends/${busy}/undrain`)).status, 200);
  });

  test('add and remove backends at run time', async () => {
    const bad = await call('POST', '/admin/backends', { name: 'c', url: 'nope' });
    assert.equal(bad.status, 400);
    assert.match((bad.json as { error: { message: string } }).error.message, /url/);
    assert.equal((await state()).backends.length, 2);
    const dup = await call('POST', '/admin/backends', { name: 'a', url: c.url, models: ['m1'] });
    assert.equal(dup.status, 409);
    const added = await call('POST', '/admin/backends', { name: 'c', url: c.url, models: ['m1'] });
    assert.equal(added.status, 201);
    assert.deepEqual(
      (await state()).backends.map((x) => x.name),
      ['a', 'b', 'c'],
    );
    assert.equal((await call('DELETE', '/admin/backends/a')).status, 200);
    assert.equal((await call('DELETE', '/admin/backends/a')).status, 404);
    for (let i = 0; i < 6; i++) {
      const res = await post(`${url}/api/generate`, { model: 'm1', prompt: 'z', stream: false });
      assert.notEqual(res.headers.get('x-llmlb-backend'), 'a');
      await res.arrayBuffer();
    }
    assert.match(await (await fetch(`${url}/metrics`)).text(), /llmlb_backend_healthy\{backend="c"\} 1/);
  });

  test('change the policy at run time; unknown policies are refused', async () => {
    assert.equal((await call('PUT', '/admin/policy', { policy: 'round-robin' })).status, 200);
    assert.equal((await state()).policy, 'round-robin');
    const bad = await call('PUT', '/admin/policy', { policy: 'nope' });
    assert.equal(bad.status, 400);
    assert.match((bad.json as { error: { message: string } }).error.message, /unknown policy/);
    const badParams = await call('PUT', '/admin/policy', { policy: { name: 'estimated-wait', alpha: 7 } });
    assert.equal(badParams.status, 400);
    assert.equal((await state()).policy, 'round-robin');
    assert.equal(
      (await call('PUT', '/admin/policy', { policy: { name: 'estimated-wait', alpha: 0.3 } })).status,
      200,
    );
    assert.equal((await state()).policy, 'estimated-wait');
  });

  test('recent decisions, newest first', async () => {
    await (
      await post(
        `${url}/api/generate`,
        { model: 'm1', prompt: 'd', stream: false },
        { 'x-request-id': 'last-one' },
      )
    ).arrayBuffer();
    const res = await call('GET', '/admin/decisions?limit=2');
    const d = (res.json as { decisions: { requestId: string; outcome: string; backend: string }[] })
      .decisions;
    assert.equal(d.length, 2);
    assert.equal(d[0]?.requestId, 'last-one');
    assert.equal(d[0]?.outcome, 'dispatch');
    assert.equal((await call('GET', '/admin/decisions?limit=0')).status, 400);
  });
});
