import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { EngineServer } from '../src/engine/server.js';
import { silentLogger } from '../src/log.js';
import { Router, type RouterSettings } from '../src/proxy/router.js';
import { backend, engine, fastProfile, post, settings, waitFor } from './helpers.js';

interface QuotaRow {
  model: string;
  inFlight: number;
  windowTokens: number;
  windowRequests: number;
  limits: { maxConcurrent: number; tokensPerMinute: number };
}

const auth = { authorization: 'Bearer s3cret' };

function quotaSettings(engineUrl: string, over: Partial<RouterSettings> = {}): RouterSettings {
  return settings([backend('a', engineUrl, { models: ['m1', 'm2', 'm3'] })], {
    admin: { token: 's3cret' },
    quotas: {
      models: {
        m1: { weight: 1, maxConcurrent: 2, tokensPerMinute: 10_000, requestsPerMinute: 100 },
        m2: { weight: 1, maxConcurrent: 1, tokensPerMinute: 10_000, requestsPerMinute: 100 },
      },
    },
    admission: { leaseTtlMs: 60_000, reclaimIntervalMs: 50, tickMs: 100 },
    ...over,
  });
}

describe('admission API', () => {
  let e: EngineServer;
  let r: Router;
  let url: string;
  const json = async (res: Response): Promise<Record<string, unknown>> =>
    (await res.json()) as Record<string, unknown>;
  const quotas = async (): Promise<QuotaRow[]> =>
    (await json(await fetch(`${url}/admin/quotas`, { headers: auth }))).models as QuotaRow[];
  const row = async (m: string): Promise<QuotaRow> => (await quotas()).find((q) => q.model === m)!;
  // Leases are released on the response's 'close', a moment after the client has the answer.
  const inFlightSettles = async (m: string): Promise<number> => {
    const end = Date.now() + 2000;
    let n = (await row(m)).inFlight;
    while (n !== 0 && Date.now() < end) {
      await new Promise((res) => setTimeout(res, 10));
      n = (await row(m)).inFlight;
    }
    return n;
  };

  before(async () => {
    e = await engine({ models: ['m1', 'm2', 'm3'], profile: fastProfile({ baseStepS: 0.01 }) });
    r = new Router(quotaSettings(e.url), silentLogger());
    url = await r.listen('127.0.0.1', 0);
  });
  after(async () => {
    await r.close();
    await e.close();
  });

  test('schedule → task, over the cap → wait_for_ms; complete frees; twice → 404', async () => {
    const a = await json(await post(`${url}/schedule`, { estimated_tokens: 100, model: 'm2' }));
    assert.equal(a.model_backend_id, 'm2');
    assert.match(String(a.task_id), /^tsk_/);
    const w = await json(await post(`${url}/schedule`, { estimated_tokens: 100, model: 'm2' }));
    assert.deepEqual(Object.keys(w), ['wait_for_ms']);
    assert.ok(Number(w.wait_for_ms) >= 50);
    assert.equal((await row('m2')).inFlight, 1);
    const done = await post(`${url}/complete`, { task_id: a.task_id });
    assert.deepEqual([done.status, await done.json()], [200, { ok: true }]);
    const again = await post(`${url}/complete`, { task_id: a.task_id });
    assert.equal(again.status, 404);
    assert.match(String((await json(again)).error), /unknown, already completed/);
    assert.equal((await row('m2')).inFlight, 0, 'no double release below zero, no dangling count');
  });

  test('heartbeat extends a lease; unknown task → 404 {ok:false, reason:not_found}', async () => {
    const a = await json(await post(`${url}/schedule`, { estimated_tokens: 10, model: 'm1' }));
    const hb = await post(`${url}/heartbeat`, { task_id: a.task_id });
    assert.equal(hb.status, 200);
    assert.equal((await json(hb)).ok, true);
    const nf = await post(`${url}/heartbeat`, { task_id: 'tsk_nope' });
    assert.equal(nf.status, 404);
    const body = await json(nf);
    assert.deepEqual([body.ok, body.reason], [false, 'not_found']);
    await post(`${url}/complete`, { task_id: a.task_id });
  });

  test('model omitted → the router picks a model with capacity', async () => {
    const got = [];
    for (let i = 0; i < 3; i++) got.push(await json(await post(`${url}/schedule`, { estimated_tokens: 10 })));
    assert.deepEqual(got.map((g) => g.model_backend_id).sort(), ['m1', 'm1', 'm2']);
    const w = await json(await post(`${url}/schedule`, { estimated_tokens: 10 }));
    assert.ok(Number(w.wait_for_ms) >= 50);
    for (const g of got) assert.equal((await post(`${url}/complete`, { task_id: g.task_id })).status, 200);
  });

  test('bad bodies → 400 with the reason, and nothing changes', async () => {
    const before = JSON.stringify(await quotas());
    const cases: [string, unknown, RegExp][] = [
      ['/schedule', {}, /estimated_tokens/],
      ['/schedule', { estimated_tokens: '10' }, /estimated_tokens/],
      ['/schedule', { estimated_tokens: 0 }, /estimated_tokens/],
      ['/schedule', { estimated_tokens: 1.5 }, /estimated_tokens/],
      ['/schedule', { estimated_tokens: 10, modle: 'm1' }, /modle/],
      ['/schedule', '{broken', /invalid JSON/],
      ['/complete', {}, /task_id/],
      ['/complete', { task_id: 5 }, /task_id/],
      ['/heartbeat', [], /expected object/],
    ];
    for (const [path, body, msg] of cases) {
      const res = await post(url + path, body);
      assert.equal(res.status, 400, `${path} ${JSON.stringify(body)}`);
      assert.match(String((await json(res)).error), msg);
    }
    const unknown = await post(`${url}/schedule`, { estimated_tokens: 10, model: 'nope' });
    assert.equal(unknown.status, 404);
    await unknown.arrayBuffer();
    const huge = await post(`${url}/schedule`, { estimated_tokens: 10_001, model: 'm1' });
    assert.equal(huge.status, 422);
    await huge.arrayBuffer();
    assert.equal((await fetch(`${url}/schedule`)).status, 405);
    assert.equal(JSON.stringify(await quotas()), before);
  });

  test('advice: the quota-aware router shape', async () => {
    const a = await json(await fetch(`${url}/advice`));
    assert.deepEqual(Object.keys(a).sort(), ['backpressure_score', 'suggested_parallelism']);
    assert.ok(Number(a.backpressure_score) >= 0 && Number(a.backpressure_score) <= 1);
    assert.ok(Number.isInteger(a.suggested_parallelism));
  });

  test('admin quotas: token required; PATCH changes limits at run time, keeps in-flight; bad patch 400', async () => {
    assert.equal((await fetch(`${url}/admin/quotas`)).status, 401);
    const held = await json(await post(`${url}/schedule`, { estimated_tokens: 10, model: 'm1' }));
    const patch = (model: string, body: unknown, headers = auth) =>
      fetch(`${url}/admin/quotas/${model}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    assert.equal((await patch('m1', { maxConcurrent: 1 }, { authorization: 'Bearer no' })).status, 401);
    const ok = await patch('m1', { maxConcurrent: 1 });
    assert.equal(ok.status, 200);
    assert.equal((await row('m1')).limits.maxConcurrent, 1);
    assert.equal((await row('m1')).inFlight, 1);
    assert.ok(
      'wait_for_ms' in (await json(await post(`${url}/schedule`, { estimated_tokens: 10, model: 'm1' }))),
    );
    for (const bad of [{ maxConcurrent: -1 }, { weight: 0 }, {}, { maxConcurent: 3 }]) {
      const res = await patch('m1', bad);
      assert.equal(res.status, 400, JSON.stringify(bad));
      await res.arrayBuffer();
    }
    assert.equal((await patch('ghost', { weight: 2 })).status, 404);
    assert.equal((await row('m1')).limits.maxConcurrent, 1);
    await post(`${url}/complete`, { task_id: held.task_id });
    assert.equal((await patch('m1', { maxConcurrent: 2 })).status, 200);
    assert.match(await (await fetch(`${url}/metrics`)).text(), /llmlb_quota_max_concurrent\{model="m1"\} 2/);
  });

  test('proxy gate: a quota-ed model is never pushed beyond its cap; waiters go later, all answered', async () => {
    let maxSeen = 0;
    let polling = true;
    const poll = (async () => {
      while (polling) {
        maxSeen = Math.max(maxSeen, r.scheduler.backend('a')?.inFlight ?? 0);
        await new Promise((res) => setTimeout(res, 2));
      }
    })();
    const res = await Promise.all(
      Array.from({ length: 4 }, () =>
        post(
          `${url}/api/generate`,
          { model: 'm2', prompt: 'x', stream: false },
          { 'x-llmlb-output-tokens': '10' },
        ),
      ),
    );
    polling = false;
    await poll;
    for (const x of res) {
      assert.equal(x.status, 200);
      await x.arrayBuffer();
    }
    assert.equal(maxSeen, 1, 'm2 has maxConcurrent 1');
    assert.equal(await inFlightSettles('m2'), 0);
    assert.equal((await row('m2')).windowRequests >= 4, true);
  });

  test('proxy gate: client abort while running or while waiting leaves no lease behind', async () => {
    const first = post(
      `${url}/api/generate`,
      { model: 'm2', prompt: 'x', stream: false },
      {
        'x-llmlb-output-tokens': '200',
      },
    );
    await waitFor(() => (r.scheduler.backend('a')?.inFlight ?? 0) === 1, 2000, 'first pushed');
    const before = (await row('m2')).windowRequests;
    const waiting = new AbortController();
    const p1 = fetch(`${url}/api/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-llmlb-output-tokens': '200' },
      body: JSON.stringify({ model: 'm2', prompt: 'x', stream: false }),
      signal: waiting.signal,
    }).catch(() => 'aborted');
    await new Promise((res) => setTimeout(res, 100));
    const gauge = async (): Promise<string | undefined> =>
      /llmlb_quota_gate_waiting\{model="m2"\} (\d+)/.exec(await (await fetch(`${url}/metrics`)).text())?.[1];
    assert.equal(await gauge(), '1', 'the waiter shows in /metrics');
    waiting.abort(); // p1 is waiting in the gate (m2 is full): it must never be sent nor counted
    assert.equal(await p1, 'aborted');
    for (let i = 0; i < 200 && (await gauge()) !== '0'; i++) await new Promise((res) => setTimeout(res, 10));
    assert.equal(await gauge(), '0', 'the gauge returns to 0 when the waiter leaves');
    const done = await first;
    assert.equal(done.status, 200);
    await done.arrayBuffer();
    assert.equal(await inFlightSettles('m2'), 0);
    assert.equal((await row('m2')).windowRequests, before, 'the aborted waiter was never admitted');
    // Abort a running one: the lease goes with the connection.
    const ac = new AbortController();
    const p2 = fetch(`${url}/api/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-llmlb-output-tokens': '300' },
      body: JSON.stringify({ model: 'm2', prompt: 'y', stream: false }),
      signal: ac.signal,
    }).catch(() => 'aborted');
    await waitFor(() => (r.scheduler.backend('a')?.inFlight ?? 0) === 1, 2000, 'pushed');
    assert.equal((await row('m2')).inFlight, 1);
    ac.abort();
    await p2;
    assert.equal(await inFlightSettles('m2'), 0);
  });

  test('a call under its /schedule lease (x-llmlb-task-id) is not admitted twice; a stale id is gated', async () => {
    const a = await json(await post(`${url}/schedule`, { estimated_tokens: 50, model: 'm2' }));
    const before = (await row('m2')).windowRequests;
    // m2's one slot is held by the lease: only the call made under it may go now.
    const call = await post(
      `${url}/api/generate`,
      { model: 'm2', prompt: 'x', stream: false },
      { 'x-llmlb-output-tokens': '5', 'x-llmlb-task-id': String(a.task_id) },
    );
    assert.equal(call.status, 200);
    await call.arrayBuffer();
    assert.equal((await row('m2')).windowRequests, before, 'the call was not charged a second time');
    assert.equal((await row('m2')).inFlight, 1, 'the lease still holds its slot until /complete');
    const ac = new AbortController();
    let pushed = false;
    const stale = fetch(`${url}/api/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-llmlb-task-id': 'tsk_nope' },
      body: JSON.stringify({ model: 'm2', prompt: 'y', stream: false }),
      signal: ac.signal,
    })
      .then(() => (pushed = true))
      .catch(() => 'aborted');
    await new Promise((res) => setTimeout(res, 150));
    assert.equal(pushed, false, 'an unknown task id waits in the gate like any request');
    assert.equal(r.scheduler.backend('a')?.inFlight ?? 0, 0);
    ac.abort();
    await stale;
    assert.equal((await post(`${url}/complete`, { task_id: a.task_id })).status, 200);
    assert.equal(await inFlightSettles('m2'), 0);
  });

  test('models without a quota pass straight through', async () => {
    const res = await post(`${url}/api/generate`, { model: 'm3', prompt: 'x', stream: false });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    assert.equal(
      (await quotas()).find((q) => q.model === 'm3'),
      undefined,
    );
  });

  test('config reload changes quotas in place', async () => {
    const held = await json(await post(`${url}/schedule`, { estimated_tokens: 10, model: 'm1' }));
    const next = quotaSettings(e.url, {
      quotas: {
        models: { m1: { weight: 1, maxConcurrent: 5, tokensPerMinute: 500, requestsPerMinute: 100 } },
      },
    });
    const changes = await r.reconfigure(next);
    assert.ok(changes.includes('quotas'));
    const rows = await quotas();
    assert.deepEqual(
      rows.map((q) => [q.model, q.limits.maxConcurrent, q.inFlight]),
      [['m1', 5, 1]],
    );
    await post(`${url}/complete`, { task_id: held.task_id });
  });
});

describe('lease reclaimer (live host)', () => {
  test('an abandoned lease is reclaimed on the interval: slot freed, tokens refunded', async () => {
    const e = await engine({ models: ['m1'] });
    const s = quotaSettings(e.url, {
      quotas: {
        models: { m1: { weight: 1, maxConcurrent: 1, tokensPerMinute: 1000, requestsPerMinute: 100 } },
      },
      admission: { leaseTtlMs: 150, reclaimIntervalMs: 25, tickMs: 100 },
    });
    const r = new Router(s, silentLogger());
    const url = await r.listen('127.0.0.1', 0);
    try {
      const a = (await (await post(`${url}/schedule`, { estimated_tokens: 900, model: 'm1' })).json()) as {
        task_id: string;
      };
      const w = (await (
        await post(`${url}/schedule`, { estimated_tokens: 900, model: 'm1' })
      ).json()) as object;
      assert.ok('wait_for_ms' in w);
      await new Promise((res) => setTimeout(res, 400));
      const again = (await (
        await post(`${url}/schedule`, { estimated_tokens: 900, model: 'm1' })
      ).json()) as object;
      assert.ok('task_id' in again, 'slot and tokens came back');
      assert.equal((await post(`${url}/complete`, { task_id: a.task_id })).status, 404);
      assert.match(await (await fetch(`${url}/metrics`)).text(), /llmlb_admission_reclaimed_total [1-9]/);
    } finally {
      await r.close();
      await e.close();
    }
  });
});
