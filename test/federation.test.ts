/**
 * Three llmlb routers, one per region, each with its own emulated engine, on loopback; every peer
 * URL goes through a TCP hop that holds each chunk 50 ms in each direction (cross-region latency).
 * Each region's only replica takes one request at a time (maxConcurrency 1), so "all local
 * replicas full" is one long request away.
 */
import assert from 'node:assert/strict';
import { createServer as createHttpServer } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { performance } from 'node:perf_hooks';
import type { EngineServer } from '../src/engine/server.js';
import { startDelayingHop, type DelayingHop } from '../src/federation/delaying-hop.js';
import { HOP_HEADER } from '../src/federation/types.js';
import { silentLogger } from '../src/log.js';
import { Router } from '../src/proxy/router.js';
import { backend, engine, fastProfile, post, settings, waitFor } from './helpers.js';

const ONE_WAY_MS = 50;
const REGIONS = ['us', 'eu', 'asia'] as const;

describe('three regions, a router each, 50 ms one way between them', () => {
  const engines = new Map<string, EngineServer>();
  const routers = new Map<string, { router: Router; url: string }>();
  const hops: DelayingHop[] = [];

  before(async () => {
    // Routers must know their peers' (hop) addresses before they listen: the hops listen first and
    // learn their router's port once it has one (a port reserved and released beforehand could be
    // taken meanwhile by another test's connection).
    const hopOf = new Map<string, DelayingHop>();
    for (const r of REGIONS) {
      // ~2 ms per token: 400 tokens keep a replica busy for ~1 s.
      engines.set(r, await engine({ name: `${r}-0`, profile: fastProfile({ slots: 1, baseStepS: 0.002 }) }));
      const hop = await startDelayingHop(0, ONE_WAY_MS);
      hops.push(hop);
      hopOf.set(r, hop);
    }
    for (const r of REGIONS) {
      const s = settings([backend(`${r}-0`, engines.get(r)!.url, { maxConcurrency: 1 })], {
        region: r,
        peers: REGIONS.filter((p) => p !== r).map((p) => ({
          name: p,
          url: hopOf.get(p)!.url,
          region: p,
        })),
        federation: {
          probeIntervalMs: 50,
          probeTimeoutMs: 1000,
          tau: 2,
          ejectMs: 60_000,
          snapshotMaxEntries: 1000,
        },
        server: { host: '127.0.0.1', port: 0, maxBodyBytes: 1 << 20 },
      });
      const rt = new Router(s, silentLogger());
      const url = await rt.listen('127.0.0.1', 0);
      hopOf.get(r)!.target = Number(new URL(url).port);
      routers.set(r, { router: rt, url });
    }
    // Every router has heard from its peers.
    for (const r of REGIONS)
      await waitFor(
        () => routers.get(r)!.router.peers!.available(Date.now()).length === 2,
        5000,
        `${r} probes`,
      );
  });

  after(async () => {
    await Promise.all(hops.map((h) => h.close()));
    for (const { router: rt } of routers.values()) await rt.close();
    for (const e of engines.values()) await e.close();
  });

  const gen = (
    url: string,
    prompt: string,
    tokens: number,
    stream = false,
    headers: Record<string, string> = {},
  ) =>
    post(
      `${url}/api/generate`,
      { model: 'm1', prompt, stream },
      { 'x-llmlb-output-tokens': String(tokens), ...headers },
    );

  it('serves locally while the local replica is free, and says which backend', async () => {
    const r = await gen(routers.get('us')!.url, 'hello', 4);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-llmlb-backend'), 'us-0');
    await r.text();
  });

  it('forwards to a peer when the local replica is full, streaming the answer across the hop', async () => {
    const us = routers.get('us')!.url;
    const long = gen(us, 'a long job', 400);
    await waitFor(() => routers.get('us')!.router.scheduler.backend('us-0')!.inFlight === 1, 2000, 'busy');
    const t0 = Date.now();
    const r = await gen(us, 'overflow', 20, true);
    assert.equal(r.status, 200);
    const served = r.headers.get('x-llmlb-backend');
    assert.ok(served === 'eu-0' || served === 'asia-0', `served by ${served}`);
    const lines = (await r.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { done: boolean });
    assert.ok(lines.length > 2 && lines.at(-1)!.done);
    assert.ok(Date.now() - t0 >= 2 * ONE_WAY_MS, 'paid the round trip');
    assert.equal((await long).status, 200);
  });

  it('a forwarded request is never forwarded again, even when its router is full too', async () => {
    const eu = routers.get('eu')!;
    const long = gen(eu.url, 'keep eu busy', 400);
    await waitFor(() => eu.router.scheduler.backend('eu-0')!.inFlight === 1, 2000, 'eu busy');
    // With the hop marker it waits for eu-0 rather than going on to us or asia.
    const pending = gen(eu.url, 'already forwarded', 4, false, { [HOP_HEADER]: '1' });
    await waitFor(() => eu.router.scheduler.queueLength === 1, 2000, 'queued at eu');
    assert.equal(eu.router.queuedForwards!.size, 0, 'not forwardable from the queue either');
    const r = await pending;
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-llmlb-backend'), 'eu-0');
    await r.text();
    await (await long).text();
  });

  /** Every region's only replica busy, us the longest; resolves once us sees no peer with room. */
  const allBusy = async (usTokens: number, euTokens: number, asiaTokens: number) => {
    const busy = (['us', 'eu', 'asia'] as const).map((r, i) => {
      const { router: rt, url } = routers.get(r)!;
      const p = gen(url, `keep ${r} busy`, [usTokens, euTokens, asiaTokens][i]!).then(async (res) => {
        await res.text();
        return res.status;
      });
      return { rt, r, p };
    });
    for (const { rt, r } of busy)
      await waitFor(() => rt.scheduler.backend(`${r}-0`)!.inFlight === 1, 2000, `${r} busy`);
    const us = routers.get('us')!.router;
    await waitFor(() => us.peers!.available(Date.now()).length === 0, 2000, 'us sees no peer with room');
    return busy.map((b) => b.p);
  };

  it('a request queued while no peer had room goes to the first peer that frees up', async () => {
    const us = routers.get('us')!;
    const fwd = us.router.queuedForwards!;
    const before = fwd.forwarded;
    // eu frees up after ~1 s, us after ~4 s: the queued request must not wait for us-0.
    const [usLong, euShort, asiaLong] = await allBusy(2000, 500, 2000);
    const usDoneAt = usLong!.then(() => Date.now());
    const queued = gen(us.url, 'waits in the us queue', 4);
    await waitFor(() => us.router.scheduler.queueLength === 1, 2000, 'queued at us');
    assert.equal(fwd.size, 1, 'forwardable while it waits');
    const r = await queued;
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-llmlb-backend'), 'eu-0');
    await r.text();
    const answeredAt = Date.now();
    assert.equal(fwd.forwarded, before + 1);
    // Its queue place was given back once: nothing waits, nothing is counted twice.
    assert.equal(us.router.scheduler.queueLength, 0);
    assert.equal(fwd.size, 0);
    assert.deepEqual(await Promise.all([usLong, euShort, asiaLong]), [200, 200, 200]);
    assert.ok(answeredAt < (await usDoneAt), 'answered before the local replica freed up');
    await waitFor(() => us.router.scheduler.inFlightTotal === 0, 2000, 'us idle');
    for (const p of us.router.peers!.describe(Date.now())) assert.equal(p.outstanding, 0, p.peer);
  });

  it('a queued request whose client left is not forwarded when a peer frees up', async () => {
    const us = routers.get('us')!;
    const fwd = us.router.queuedForwards!;
    const before = fwd.forwarded;
    const sentBefore = us.router.peers!.describe(Date.now()).map((p) => p.forwarded);
    const [usLong, euShort, asiaLong] = await allBusy(1500, 500, 1500);
    const ac = new AbortController();
    const gone = fetch(`${us.url}/api/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-llmlb-output-tokens': '4' },
      body: JSON.stringify({ model: 'm1', prompt: 'leaves early', stream: false }),
      signal: ac.signal,
    }).catch((err: unknown) => err);
    await waitFor(() => fwd.size === 1, 2000, 'queued at us');
    ac.abort();
    assert.ok((await gone) instanceof Error);
    await waitFor(() => us.router.scheduler.queueLength === 0 && fwd.size === 0, 2000, 'left the queue');
    assert.equal(await euShort, 200);
    // eu has room again and us has heard so: still nothing goes there.
    await waitFor(() => us.router.peers!.isAvailable('eu', Date.now()), 3000, 'eu has room');
    assert.equal(fwd.forwarded, before);
    assert.deepEqual(
      us.router.peers!.describe(Date.now()).map((p) => p.forwarded),
      sentBefore,
    );
    assert.deepEqual(await Promise.all([usLong, asiaLong]), [200, 200]);
  });

  it('a peer that is down: the request runs locally after all, and the peer is skipped', async () => {
    const asia = routers.get('asia')!;
    await routers.get('eu')!.router.close();
    await routers.get('us')!.router.close();
    const long = gen(asia.url, 'keep asia busy', 200);
    await waitFor(() => asia.router.scheduler.backend('asia-0')!.inFlight === 1, 2000, 'asia busy');
    const r = await gen(asia.url, 'nowhere to go', 4);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-llmlb-backend'), 'asia-0');
    await r.text();
    await (await long).text();
    await waitFor(() => asia.router.peers!.available(Date.now()).length === 0, 3000, 'peers ejected');
  });
});

describe('what a router lends its peers (federation.lendKvBelow)', () => {
  it('its status counts only replicas below the KV usage given; its own routing still sees them all', async () => {
    const peers = [{ name: 'eu', url: 'http://127.0.0.1:9', region: 'eu' }];
    const make = (lendKvBelow?: number) =>
      new Router(
        settings([], {
          region: 'us',
          peers,
          federation: {
            probeIntervalMs: 1000,
            probeTimeoutMs: 100,
            tau: 2,
            ejectMs: 1000,
            snapshotMaxEntries: 10,
            ...(lendKvBelow === undefined ? {} : { lendKvBelow }),
          },
        }),
        silentLogger(),
      );
    for (const [lend, expected] of [
      [undefined, 2],
      [0.6, 1],
    ] as const) {
      const rt = make(lend);
      for (const [name, kvUsage] of [
        ['us-0', 0.2],
        ['us-1', 0.8],
      ] as const) {
        rt.scheduler.addBackend({ name, api: 'ollama', models: ['m1'], maxConcurrency: 4, weight: 1 });
        rt.scheduler.setMetrics(name, { running: 1, waiting: 0, kvUsage, at: performance.now() });
      }
      assert.equal(rt.peerStatus().availableReplicas, expected, `lendKvBelow ${lend}`);
      await rt.close();
    }
  });
});

describe('a queued request taken by a peer that then fails before answering', () => {
  it('runs here after all, once, and the peer is ejected', async () => {
    // The peer says it has room only when told to, and answers every forward with a 503.
    let room = 0;
    let forwards = 0;
    const peer = createHttpServer((req, res) => {
      if (req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ region: 'bad', availableReplicas: room, queueLength: 0 }));
        return;
      }
      forwards++;
      req.resume();
      res.writeHead(503).end();
    });
    await new Promise<void>((ok) => peer.listen(0, '127.0.0.1', ok));
    const eng = await engine({ name: 'x-0', profile: fastProfile({ slots: 1, baseStepS: 0.002 }) });
    const rt = new Router(
      settings([backend('x-0', eng.url, { maxConcurrency: 1 })], {
        region: 'x',
        peers: [
          {
            name: 'bad',
            url: `http://127.0.0.1:${(peer.address() as { port: number }).port}`,
            region: 'bad',
          },
        ],
        federation: {
          probeIntervalMs: 20,
          probeTimeoutMs: 1000,
          tau: 2,
          ejectMs: 60_000,
          snapshotMaxEntries: 10,
        },
      }),
      silentLogger(),
    );
    try {
      const url = await rt.listen('127.0.0.1', 0);
      const gen = (prompt: string, tokens: number) =>
        post(
          `${url}/api/generate`,
          { model: 'm1', prompt, stream: false },
          { 'x-llmlb-output-tokens': String(tokens) },
        );
      const long = gen('keep x busy', 400);
      await waitFor(() => rt.scheduler.backend('x-0')!.inFlight === 1, 2000, 'x busy');
      const queued = gen('queued, then taken', 4);
      await waitFor(() => rt.queuedForwards!.size === 1, 2000, 'queued');
      room = 1; // the next probe says the peer has room: the queue head goes there, and fails
      const r = await queued;
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('x-llmlb-backend'), 'x-0');
      await r.text();
      assert.equal((await long).status, 200);
      assert.equal(forwards, 1, 'offered to the peer once');
      assert.equal(rt.queuedForwards!.forwarded, 1);
      const [p] = rt.peers!.describe(Date.now());
      assert.equal(p!.outstanding, 0);
      assert.ok(p!.failures >= 1 && !p!.available, 'ejected');
      await waitFor(() => rt.scheduler.queueLength === 0 && rt.scheduler.inFlightTotal === 0, 2000, 'idle');
      assert.equal(rt.queuedForwards!.size, 0);
    } finally {
      await rt.close();
      await eng.close();
      await new Promise<void>((ok) => peer.close(() => ok()));
    }
  });
});
