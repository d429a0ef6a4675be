/**
 * Issue 16, defect 3 end to end: routers on a private redis-server that the tests flush, kill
 * and restart. Proxied traffic never runs over its cap after Redis lost everything; an outage
 * answers 503 + Retry-After within a second (or passes proxied traffic with state.failOpen);
 * reconnect and SIGHUP restore the configured limits.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '../src/log.js';
import { Router, type RouterSettings } from '../src/proxy/router.js';
import { RedisServer } from '../src/state/redis-server.testing.js';
import { backend, engine, fastProfile, post, settings } from './helpers.js';

let server: RedisServer;
before(async () => {
  server = await RedisServer.start();
});
after(async () => {
  await server.kill();
});

const CAP = 8;
let n = 0;
function gated(
  url: string,
  over: Partial<NonNullable<RouterSettings['state']>> = {},
  reclaimIntervalMs = 100,
) {
  return settings([backend('a', url)], {
    admin: { token: 't' },
    state: { redis: server.url, keyPrefix: `r${++n}:{q}:`, commandTimeoutMs: 300, ...over },
    quotas: {
      models: {
        m1: { weight: 1, maxConcurrent: CAP, tokensPerMinute: 1_000_000, requestsPerMinute: 10_000 },
      },
    },
    admission: { leaseTtlMs: 10_000, reclaimIntervalMs, tickMs: 100 },
  });
}

async function start(s: RouterSettings): Promise<{ router: Router; url: string }> {
  const router = new Router(s, silentLogger());
  return { router, url: await router.listen('127.0.0.1', 0) };
}

const generate = (url: string, tokens: number): Promise<Response> =>
  post(
    `${url}/api/generate`,
    { model: 'm1', prompt: 'x', stream: false },
    { 'x-llmlb-output-tokens': String(tokens) },
  );

async function metric(url: string, name: string): Promise<number | undefined> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

async function until(cond: () => Promise<boolean> | boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test(`proxied: ${CAP} of ${CAP} running, FLUSHALL, 4 more arrive → they wait; never more than ${CAP} at once`, async () => {
  // Slow enough that the first 8 are still running when the 4 arrive; slots for all 12.
  const e = await engine({ profile: fastProfile({ slots: 16, baseStepS: 0.04 }) });
  const { router, url } = await start(gated(e.url));
  try {
    let maxSeen = 0;
    let polling = true;
    const poll = (async () => {
      while (polling) {
        maxSeen = Math.max(maxSeen, router.scheduler.backend('a')?.inFlight ?? 0);
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    const first = Array.from({ length: CAP }, () => generate(url, 25));
    await until(() => (router.scheduler.backend('a')?.inFlight ?? 0) === CAP, 3000, '8 running');
    await server.flushAll();
    const more = Array.from({ length: 4 }, () => generate(url, 5));
    const all = await Promise.all([...first, ...more]);
    polling = false;
    await poll;
    for (const r of all) {
      assert.equal(r.status, 200);
      await r.arrayBuffer();
    }
    assert.ok(maxSeen <= CAP, `${maxSeen} ran at once against a cap of ${CAP}`);
    assert.equal(await metric(url, 'llmlb_quota_store_reseeds_total'), 1);
    // Leases are released as each response closes, a moment after the client has it.
    await until(
      async () => (await metric(url, 'llmlb_quota_in_flight{model="m1"}')) === 0,
      3000,
      'every lease released',
    );
  } finally {
    await router.close();
    await e.close();
  }
});

test('outage: 503 + Retry-After within a second (proxied and /schedule); failOpen passes proxied traffic only; restart restores', async () => {
  const e = await engine();
  const closed = await start(gated(e.url));
  const open = await start(gated(e.url, { failOpen: true }));
  try {
    assert.equal((await generate(closed.url, 2)).status, 200);
    await server.kill();
    for (const url of [closed.url, open.url]) {
      const t0 = Date.now();
      const r = await post(`${url}/schedule`, { estimated_tokens: 10, model: 'm1' });
      assert.equal(r.status, 503, await r.text());
      assert.equal(r.headers.get('retry-after'), '1');
      assert.ok(Date.now() - t0 < 1000, `/schedule answered in ${Date.now() - t0} ms`);
    }
    const t0 = Date.now();
    const refused = await generate(closed.url, 2);
    assert.equal(refused.status, 503);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.match(await refused.text(), /quota store unavailable/);
    assert.ok(Date.now() - t0 < 1000, `proxied answered in ${Date.now() - t0} ms`);
    for (let i = 0; i < 3; i++) {
      const r = await generate(open.url, 2);
      assert.equal(r.status, 200, 'failOpen: proxied requests pass');
      await r.arrayBuffer();
    }
    assert.equal(await metric(open.url, 'llmlb_quota_gate_fail_open_total{model="m1"}'), 3);
    assert.equal(await metric(closed.url, 'llmlb_quota_store_up'), 0, '/metrics answers during the outage');
    assert.equal(await metric(closed.url, 'llmlb_quota_store_outages_total'), 1);

    await server.restart();
    await until(async () => (await metric(closed.url, 'llmlb_quota_store_up')) === 1, 5000, 'store up');
    // Configured limits are back without any config action: never "no quota is configured".
    const end = Date.now() + 3000;
    for (;;) {
      const r = await post(`${closed.url}/schedule`, { estimated_tokens: 10, model: 'm1' });
      assert.equal(r.status, 200, await r.clone().text());
      const body = (await r.json()) as { task_id?: string; wait_for_ms?: number };
      if (body.task_id) break;
      assert.ok(Date.now() < end && body.wait_for_ms! > 0, 'admitted after the grace period');
      await new Promise((res) => setTimeout(res, body.wait_for_ms));
    }
    assert.equal((await generate(open.url, 2)).status, 200);
  } finally {
    await Promise.all([closed.router.close(), open.router.close()]);
    await e.close();
  }
});

test('SIGHUP (a reload of the same config) restores limits Redis lost, with no request in between', async () => {
  const e = await engine();
  // A reclaimer slower than the test: only the reload can restore the state here.
  const s = gated(e.url, {}, 60_000);
  const { router } = await start(s);
  try {
    const key = `${s.state!.keyPrefix}state`;
    await server.flushAll();
    assert.equal(await server.run((r) => r.hget(key, 'json')), null);
    assert.deepEqual(await router.reconfigure(s), []);
    const json = await server.run((r) => r.hget(key, 'json'));
    assert.ok(json?.includes('"m1"'), `state after reload: ${json}`);
  } finally {
    await router.close();
    await e.close();
  }
});

test('a model with a quota here but none in the shared state (replicas configured differently) gets 503, never ungated', async () => {
  const e = await engine({ models: ['m1', 'm2'] });
  const mine = gated(e.url);
  const both = {
    ...mine,
    backends: [backend('a', e.url, { models: ['m1', 'm2'] })],
    quotas: { models: { ...mine.quotas!.models, m2: mine.quotas!.models.m1! } },
  };
  const b = await start(both);
  // A replica whose config has only m1 starts on the same prefix: the shared state drops m2.
  const a = await start({ ...mine, backends: both.backends });
  try {
    const r = await post(`${b.url}/api/generate`, { model: 'm2', prompt: 'x', stream: false });
    assert.equal(r.status, 503);
    assert.match(await r.text(), /missing from the shared state/);
    assert.equal(r.headers.get('retry-after'), '1');
  } finally {
    await Promise.all([a.router.close(), b.router.close()]);
    await e.close();
  }
});
