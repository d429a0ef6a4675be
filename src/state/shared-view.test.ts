import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { createPolicy } from '../core/policies/index.js';
import { Scheduler } from '../core/scheduler.js';
import type { Decision } from '../core/types.js';
import { withSharedView } from '../federation/shared-view-policy.js';
import { SharedView, redisViewTransport } from './shared-view.js';

const URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';
const CAPS = new Map([
  ['a', 2],
  ['b', 3],
  ['c', Infinity],
]);

/** A router reduced to its scheduler, sharing its view through Redis (or not). */
function router(id: string, redis: Redis | undefined, prefix: string) {
  let view: SharedView | undefined;
  const policy = createPolicy('least-connections', () => 0.5);
  const scheduler = new Scheduler({
    policy: redis ? withSharedView(policy, (n) => view!.othersOf(n)) : policy,
  });
  for (const [name, cap] of CAPS)
    scheduler.addBackend({ name, api: 'ollama', models: ['m'], maxConcurrency: cap, weight: 1 });
  const decisions: Decision[] = [];
  if (redis) {
    view = new SharedView(
      redis,
      {
        backends: () =>
          scheduler
            .backendViews()
            .map((b) => ({ name: b.name, inFlight: b.inFlight, cap: CAPS.get(b.name)! })),
        queued: () => scheduler.queueLength,
        applyCaps: (caps) => {
          for (const [name, cap] of caps)
            decisions.push(...scheduler.updateBackend(name, { maxConcurrency: cap }, Date.now()));
        },
      },
      { routerId: id, intervalMs: 5, prefix, ttlMs: 1000, headroom: 1 },
    );
  }
  return { id, scheduler, view, decisions };
}

type R = ReturnType<typeof router>;

/** Drive three routers: 60 requests each, each held 2–10 ms; returns the most in flight at once per backend. */
async function run(routers: R[]): Promise<Map<string, number>> {
  const peak = new Map<string, number>();
  const inFlight = new Map<string, number>();
  let done = 0;
  const total = routers.length * 60;
  const dispatch = (r: R, ds: readonly Decision[]): void => {
    for (const d of ds) {
      if (d.type !== 'dispatch') continue;
      const n = (inFlight.get(d.backend) ?? 0) + 1;
      inFlight.set(d.backend, n);
      peak.set(d.backend, Math.max(peak.get(d.backend) ?? 0, n));
      setTimeout(
        () => {
          inFlight.set(d.backend, inFlight.get(d.backend)! - 1);
          done++;
          dispatch(
            r,
            r.scheduler.complete(d.request.id, { ok: true, dispatchedAt: 0, finishedAt: 1 }, Date.now()),
          );
        },
        2 + ((d.request.id.length * 7 + done) % 9),
      );
    }
  };
  const pumps = routers.map((r) =>
    setInterval(() => {
      dispatch(r, r.decisions.splice(0));
    }, 1),
  );
  for (const r of routers) r.view?.start();
  // First rounds in (connections open, script loaded) before the load starts.
  for (let t = 0; t < 200 && routers.some((r) => r.view && !r.view.up); t++)
    await new Promise((ok) => setTimeout(ok, 10));
  for (let i = 0; i < 60; i++)
    for (const r of routers)
      dispatch(
        r,
        r.scheduler.submit(
          { id: `${r.id}-${i}`, model: 'm', api: 'ollama', arrivedAt: 0, promptText: '' },
          Date.now(),
        ),
      );
  const t0 = Date.now();
  while (done < total && Date.now() - t0 < 15_000) await new Promise((ok) => setTimeout(ok, 10));
  for (const p of pumps) clearInterval(p);
  for (const r of routers) r.view?.stop();
  assert.equal(done, total, 'every request finished');
  return peak;
}

describe('shared view through Redis', () => {
  const conns: Redis[] = [];
  after(() => {
    for (const c of conns) c.disconnect();
  });

  it('three routers sharing one Redis never exceed a backend’s maxConcurrency together', async () => {
    const prefix = `llmlb-test-${process.pid}-${Date.now()}`;
    const routers = ['r0', 'r1', 'r2'].map((id) => {
      const c = new Redis(URL);
      conns.push(c);
      return router(id, c, prefix);
    });
    const peak = await run(routers);
    assert.ok(peak.get('a')! <= 2, `a peaked at ${peak.get('a')}`);
    assert.ok(peak.get('b')! <= 3, `b peaked at ${peak.get('b')}`);
    // The capped backends were used, up to their caps: the bound is not met by leaving them idle.
    assert.ok(peak.get('a')! >= 1 && peak.get('b')! >= 2, `peaks ${[...peak]}`);
    assert.ok(routers.every((r) => r.view!.up));
  });

  it('without it, the same three routers do exceed the caps (what the test guards against)', async () => {
    const peak = await run(['r0', 'r1', 'r2'].map((id) => router(id, undefined, '')));
    assert.ok(peak.get('a')! > 2 || peak.get('b')! > 3, `peaks ${[...peak]}`);
  });

  it('a router that loses Redis keeps routing on its own view and says so', async () => {
    const dead = new Redis('redis://127.0.0.1:1/0', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    });
    conns.push(dead);
    dead.on('error', () => {});
    const r = router('lonely', dead, 'x');
    await r.view!.sync();
    assert.equal(r.view!.up, false);
    assert.equal(r.view!.failures, 1);
    // Its configured caps, and it still routes.
    assert.equal(r.scheduler.backend('a')!.maxConcurrency, 2);
    const ds = r.scheduler.submit({ id: 'q', model: 'm', api: 'ollama', arrivedAt: 0, promptText: '' }, 0);
    assert.equal(ds[0]?.type, 'dispatch');
  });
});

describe('hand-over through Redis (sharedState: routers ask for what they wait for)', () => {
  it('a slot one router frees reaches the router waiting for it without that router’s own round, once', async () => {
    const prefix = `llmlb-test-handover-${process.pid}-${Date.now()}`;
    const conns = [new Redis(URL), new Redis(URL), new Redis(URL), new Redis(URL)];
    const [pubA, subA, pubB, subB] = conns as [Redis, Redis, Redis, Redis];
    const state = { aIn: 2, bDemand: 1, bPaused: false };
    const capsA: number[] = [];
    const capsB: number[] = [];
    const a = new SharedView(
      redisViewTransport(pubA, prefix, subA),
      {
        backends: () => [{ name: 'x', inFlight: state.aIn, cap: 2 }],
        queued: () => 0,
        applyCaps: (c) => capsA.push(c.get('x')!),
        demand: () => 0,
      },
      { routerId: 'A', intervalMs: 60_000, prefix, ttlMs: 5000 },
    );
    const inner = redisViewTransport(pubB, prefix, subB);
    const b = new SharedView(
      {
        // Once paused, B's rounds never come back: what B gets then, a hand-over brought.
        round: (...args) => (state.bPaused ? new Promise(() => {}) : inner.round(...args)),
        grants: (on) => inner.grants!(on),
      },
      {
        backends: () => [{ name: 'x', inFlight: 0, cap: 2 }],
        queued: () => 0,
        applyCaps: (c) => capsB.push(c.get('x')!),
        demand: () => state.bDemand,
      },
      { routerId: 'B', intervalMs: 60_000, prefix, ttlMs: 5000 },
    );
    const until = async (ok: () => boolean, what: string): Promise<void> => {
      for (let t = 0; t < 300 && !ok(); t++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(ok(), what);
    };
    try {
      a.start();
      await until(() => capsA.at(-1) === 2, 'A holds the whole cap');
      b.start();
      await until(() => capsB.length >= 2 && b.up, 'B asked (its ask is in the book)');
      assert.equal(capsB.at(-1), 0, 'nothing left for B');
      state.bPaused = true;
      await new Promise((r) => setTimeout(r, 50)); // B's polling round now hangs
      state.aIn = 1; // A's request ended: A's round gives the slot straight to B
      await a.sync();
      await until(() => capsB.at(-1) === 1, `B got the slot by hand-over (caps ${capsB})`);
      assert.equal(b.grantsTaken, 1);
      assert.equal(capsA.at(-1), 1);
      // The same hand-over heard again is not applied twice.
      b.grant({ router: 'B', key: 'x', granted: 1 });
      b.grant({ router: 'A', key: 'x', granted: 5 });
      assert.equal(b.grantsTaken, 1);
      // A cannot take it back: the book counts it B's.
      state.aIn = 1;
      await a.sync();
      assert.equal(capsA.at(-1), 1, 'A does not retake the slot it handed over');
      const fields = await pubA.hgetall(`${prefix}:shared-view:x`);
      const held = Object.values(fields).map((v) => Math.max(...v.split(' ').slice(0, 2).map(Number)));
      assert.equal(
        held.reduce((s, n) => s + n, 0),
        2,
        `the book: ${JSON.stringify(fields)}`,
      );
    } finally {
      a.stop();
      b.stop();
      await pubA.del(`${prefix}:shared-view:x`, `${prefix}:shared-view-asks:x`);
      for (const c of conns) c.disconnect();
    }
  });

  it('with two routers waiting, the slot goes to the one whose oldest request has waited longest', async () => {
    const prefix = `llmlb-test-oldest-${process.pid}-${Date.now()}`;
    const conns = Array.from({ length: 6 }, () => new Redis(URL));
    const state = { aIn: 2 };
    const caps = new Map<string, number[]>([
      ['A', []],
      ['B', []],
      ['C', []],
    ]);
    // B waits with 3 requests, its oldest for 50 ms; C with 1, waiting for 400 ms.
    const wait = new Map([
      ['A', { demand: 0, waitedMs: 0 }],
      ['B', { demand: 3, waitedMs: 50 }],
      ['C', { demand: 1, waitedMs: 400 }],
    ]);
    const views = ['A', 'B', 'C'].map(
      (id, i) =>
        new SharedView(
          redisViewTransport(conns[2 * i]!, prefix, conns[2 * i + 1]!),
          {
            backends: () => [{ name: 'x', inFlight: id === 'A' ? state.aIn : 0, cap: 2 }],
            queued: () => 0,
            applyCaps: (c) => caps.get(id)!.push(c.get('x')!),
            demand: () => wait.get(id)!.demand,
            waitedMs: () => wait.get(id)!.waitedMs,
          },
          { routerId: id, intervalMs: 60_000, prefix, ttlMs: 5000 },
        ),
    );
    const [a, b, c] = views as [SharedView, SharedView, SharedView];
    const until = async (ok: () => boolean, what: string): Promise<void> => {
      for (let t = 0; t < 300 && !ok(); t++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(ok(), what);
    };
    try {
      a.start();
      await until(() => caps.get('A')!.at(-1) === 2, 'A holds the whole cap');
      b.start();
      c.start();
      await until(() => b.up && c.up, 'B and C asked');
      await new Promise((r) => setTimeout(r, 50));
      state.aIn = 1;
      await a.sync();
      // C hears it by hand-over or by its own next round (it polls while its ask is unmet): either way
      // the book gave the slot to C, and B's allowance stays 0.
      await until(
        () => caps.get('C')!.at(-1) === 1,
        `C got the slot (B ${caps.get('B')}, C ${caps.get('C')})`,
      );
      await b.sync();
      assert.equal(caps.get('B')!.at(-1), 0, 'not B, though more of its requests wait');
      assert.equal(b.grantsTaken, 0);
    } finally {
      for (const v of views) v.stop();
      await conns[0]!.del(`${prefix}:shared-view:x`, `${prefix}:shared-view-asks:x`);
      for (const conn of conns) conn.disconnect();
    }
  });
});
