/**
 * Three llmlb routers, one per region, each with its own emulated engine, on loopback; every peer
 * URL goes through a TCP hop that holds each chunk 50 ms in each direction (cross-region latency).
 * Each region's only replica takes one request at a time (maxConcurrency 1), so "all local
 * replicas full" is one long request away.
 */
import assert from 'node:assert/strict';
import { createServer as createTcpServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { EngineServer } from '../src/engine/server.js';
import { startDelayingHop, type DelayingHop } from '../src/federation/delaying-hop.js';
import { HOP_HEADER } from '../src/federation/types.js';
import { silentLogger } from '../src/log.js';
import { Router } from '../src/proxy/router.js';
import { backend, engine, fastProfile, post, settings, waitFor } from './helpers.js';

const ONE_WAY_MS = 50;
const REGIONS = ['us', 'eu', 'asia'] as const;

/** Reserve a port: routers must know their peers' (hop) addresses before they listen. */
async function freePort(): Promise<number> {
  const s = createTcpServer();
  await new Promise<void>((ok) => s.listen(0, '127.0.0.1', ok));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((ok) => s.close(() => ok()));
  return port;
}

describe('three regions, a router each, 50 ms one way between them', () => {
  const engines = new Map<string, EngineServer>();
  const routers = new Map<string, { router: Router; url: string }>();
  const hops: DelayingHop[] = [];

  before(async () => {
    const ports = new Map<string, number>();
    const hopPorts = new Map<string, number>();
    for (const r of REGIONS) {
      // ~2 ms per token: 400 tokens keep a replica busy for ~1 s.
      engines.set(r, await engine({ name: `${r}-0`, profile: fastProfile({ slots: 1, baseStepS: 0.002 }) }));
      ports.set(r, await freePort());
    }
    for (const r of REGIONS) {
      const hop = await startDelayingHop(ports.get(r)!, ONE_WAY_MS);
      hops.push(hop);
      hopPorts.set(r, hop.port);
    }
    for (const r of REGIONS) {
      const s = settings([backend(`${r}-0`, engines.get(r)!.url, { maxConcurrency: 1 })], {
        region: r,
        peers: REGIONS.filter((p) => p !== r).map((p) => ({
          name: p,
          url: `http://127.0.0.1:${hopPorts.get(p)}`,
          region: p,
        })),
        federation: {
          probeIntervalMs: 50,
          probeTimeoutMs: 1000,
          tau: 2,
          ejectMs: 60_000,
          snapshotMaxEntries: 1000,
        },
        server: { host: '127.0.0.1', port: ports.get(r)!, maxBodyBytes: 1 << 20 },
      });
      const rt = new Router(s, silentLogger());
      routers.set(r, { router: rt, url: await rt.listen('127.0.0.1', ports.get(r)!) });
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
    const r = await gen(eu.url, 'already forwarded', 4, false, { [HOP_HEADER]: '1' });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-llmlb-backend'), 'eu-0');
    await r.text();
    await (await long).text();
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
