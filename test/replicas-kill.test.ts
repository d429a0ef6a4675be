/**
 * kill -9 of one of three `llmlb serve` processes sharing their view through a private Redis
 * (issue #31, item 4), with real processes, real HTTP and engines behind counting hops: only the
 * requests the killed router held fail (a connection error at the client), the others take the
 * new requests, its Redis fields (held slots) are gone within ttl + a round, no engine ever holds
 * more than its cap, and the survivors' /metrics show the view up and nothing left in flight.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { Agent, request } from 'undici';
import {
  countingHop,
  routerYaml,
  sharedFields,
  sharedViewUp,
  spawnRouter,
  type CountedEngine,
  type RouterProc,
} from '../bench/replicas-fleet.js';
import { startEngine, type EngineServer } from '../src/engine/server.js';
import { RedisServer } from '../src/state/redis-server.testing.js';
import { fastProfile } from './helpers.js';

const CAP = 3;
const TTL = 1000;
const PREFIX = 'kill-test';

async function inFlight(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return [...text.matchAll(/^llmlb_backend_in_flight\{[^}]*\} (\d+)/gm)].reduce(
    (a, m) => a + Number(m[1]),
    0,
  );
}

describe('kill -9 of one of three llmlb serve processes on one Redis', () => {
  const closers: (() => Promise<void>)[] = [];
  after(async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
  });

  it('fails only its own requests, returns its slots within ttl, and no cap is exceeded', async () => {
    const redis = await RedisServer.start();
    closers.push(() => redis.kill());
    const engines: EngineServer[] = [];
    const hops: CountedEngine[] = [];
    for (let i = 0; i < 3; i++) {
      const e = await startEngine({
        port: 0,
        api: 'openai',
        models: ['m1'],
        profile: fastProfile({ slots: 8 }),
        seed: i + 1,
      });
      engines.push(e);
      closers.push(() => e.close());
      const h = await countingHop(e.url);
      hops.push(h);
      closers.push(() => h.close());
    }
    const yaml = routerYaml({
      backends: hops.map((h, i) => ({ name: `e${i}`, url: h.url, cap: CAP })),
      policy: 'least-connections',
      model: 'm1',
      shared: { redis: redis.url, prefix: PREFIX, intervalMs: 50, ttlMs: TTL },
    });
    const routers: RouterProc[] = await Promise.all([0, 1, 2].map(() => spawnRouter(yaml)));
    for (const r of routers) closers.push(() => r.close());
    for (const r of routers)
      for (let t = 0; (await sharedViewUp(r.url)) !== 1; t++) {
        assert.ok(t < 500, 'shared view up');
        await sleep(20);
      }

    const dispatcher = new Agent({ connections: 64 });
    closers.push(() => dispatcher.close());
    const alive = [true, true, true];
    let killedAt = Infinity;
    let stop = false;
    const outs: { router: number; startedAt: number; ok: boolean; connError: boolean }[] = [];
    let seq = 0;
    const worker = async (): Promise<void> => {
      while (!stop) {
        const i = seq++;
        let k = i % 3;
        while (!alive[k]) k = (k + 1) % 3;
        const startedAt = performance.now();
        try {
          const res = await request(`${routers[k]!.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-llmlb-output-tokens': String(20 + (i % 20)) },
            body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: `q${i}` }] }),
            dispatcher,
          });
          const text = await res.body.text();
          outs.push({
            router: k,
            startedAt,
            ok: res.statusCode === 200 && text.includes('choices'),
            connError: false,
          });
        } catch {
          outs.push({ router: k, startedAt, ok: false, connError: true });
        }
      }
    };
    const load = Promise.all(Array.from({ length: 18 }, worker));
    await sleep(800);
    const doomed = routers[2]!;
    killedAt = performance.now();
    alive[2] = false;
    await doomed.kill9();
    const conn = new Redis(redis.url);
    closers.push(async () => conn.disconnect());
    let returnedMs = NaN;
    for (;;) {
      const f = await sharedFields(conn, PREFIX, ['e0', 'e1', 'e2']);
      if ([...f.values()].every((m) => ![...m.keys()].some((id) => id.startsWith(doomed.idPrefix)))) {
        returnedMs = performance.now() - killedAt;
        break;
      }
      assert.ok(performance.now() - killedAt < TTL + 2000, 'the dead router’s fields expire');
      await sleep(10);
    }
    await sleep(500);
    stop = true;
    await load;

    assert.ok(returnedMs <= TTL + 300, `held slots back after ${returnedMs.toFixed(0)} ms (ttl ${TTL})`);
    const failed = outs.filter((o) => !o.ok);
    assert.ok(failed.length > 0, 'the killed router held requests');
    for (const f of failed) {
      assert.equal(f.router, 2, 'only the killed router’s requests fail');
      assert.ok(f.connError && f.startedAt < killedAt, 'each as a connection error, sent before the kill');
    }
    const later = outs.filter((o) => o.startedAt > killedAt);
    assert.ok(later.length > 50 && later.every((o) => o.ok && o.router !== 2), 'the others took the load');
    assert.ok(
      hops.every((h) => h.peak <= CAP),
      `engine peaks ${hops.map((h) => h.peak).join('/')}`,
    );
    assert.ok(
      hops.every((h) => h.peak >= 1),
      'every engine was used',
    );
    for (const r of routers.slice(0, 2)) {
      assert.equal(await sharedViewUp(r.url), 1);
      assert.equal(await inFlight(r.url), 0, 'no slot leaked at the survivors');
    }
    assert.ok(hops.every((h) => h.inFlight === 0));
  });
});
