/**
 * The shared view's faults (issue #31, item 4), on a private redis-server that the tests kill,
 * restart and flush, with routers reduced to their schedulers (the view's production wiring is
 * the Router's; bench:faults runs the same faults against `llmlb serve` processes):
 * - a router that goes silent (its process killed) gives its held slots back within ttl + a round;
 * - FLUSHDB / a restarted Redis: the view rebuilds, and no backend goes past its cap meanwhile;
 * - Redis unreachable: routing continues on the router's own view (up false), the view rebuilds
 *   after it returns, caps hold after recovery;
 * - one router cut off from Redis (a TCP hop we cut) but not from its engines: it says so, the
 *   others stay up, and its share comes back to them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { tcpHop, type CuttableHop } from '../bench/replicas-fleet.js';
import { createPolicy } from '../src/core/policies/index.js';
import { Scheduler } from '../src/core/scheduler.js';
import type { Decision } from '../src/core/types.js';
import { withSharedView } from '../src/federation/shared-view-policy.js';
import { RedisServer } from '../src/state/redis-server.testing.js';
import { SharedView } from '../src/state/shared-view.js';

const CAPS = new Map([
  ['a', 4],
  ['b', 6],
]);
const INTERVAL = 50;
const TTL = 1000;

/** Engine-side truth: requests open per backend across all routers, and the most seen at once. */
class Fleet {
  readonly open = new Map<string, number>();
  peak = new Map<string, number>();
  done = 0;
  resetPeaks(): void {
    this.peak = new Map(this.open);
  }
  start(b: string): void {
    const n = (this.open.get(b) ?? 0) + 1;
    this.open.set(b, n);
    this.peak.set(b, Math.max(this.peak.get(b) ?? 0, n));
  }
  end(b: string): void {
    this.open.set(b, this.open.get(b)! - 1);
    this.done++;
  }
  overCap(): string[] {
    return [...this.peak].filter(([b, n]) => n > CAPS.get(b)!).map(([b, n]) => `${b}: ${n} > ${CAPS.get(b)}`);
  }
}

/** A router reduced to its scheduler, its view through `url`; requests hold 20–40 ms. */
class MiniRouter {
  readonly scheduler: Scheduler;
  readonly view: SharedView;
  readonly redis: Redis;
  private readonly pending: Decision[] = [];
  private pump: NodeJS.Timeout | undefined;
  private feed: NodeJS.Timeout | undefined;
  private seq = 0;
  dead = false;

  constructor(
    readonly id: string,
    url: string,
    private readonly fleet: Fleet,
  ) {
    this.redis = new Redis(url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, commandTimeout: 500 });
    this.redis.on('error', () => undefined);
    this.scheduler = new Scheduler({
      policy: withSharedView(
        createPolicy('least-connections', () => 0.5),
        (n) => this.view.othersOf(n),
      ),
    });
    for (const [name, cap] of CAPS)
      this.scheduler.addBackend({ name, api: 'ollama', models: ['m'], maxConcurrency: cap, weight: 1 });
    this.view = new SharedView(
      this.redis,
      {
        backends: () =>
          this.scheduler
            .backendViews()
            .map((b) => ({ name: b.name, inFlight: b.inFlight, cap: CAPS.get(b.name)! })),
        queued: () => this.scheduler.queueLength,
        applyCaps: (caps) => {
          for (const [name, cap] of caps)
            this.pending.push(...this.scheduler.updateBackend(name, { maxConcurrency: cap }, Date.now()));
        },
      },
      { routerId: id, intervalMs: INTERVAL, ttlMs: TTL, prefix: 'faults' },
    );
  }

  private apply(ds: readonly Decision[]): void {
    for (const d of ds) {
      if (d.type !== 'dispatch' || this.dead) continue;
      this.fleet.start(d.backend);
      setTimeout(
        () => {
          this.fleet.end(d.backend);
          if (this.dead) return;
          this.apply(
            this.scheduler.complete(d.request.id, { ok: true, dispatchedAt: 0, finishedAt: 1 }, Date.now()),
          );
        },
        20 + ((this.seq * 7) % 21),
      );
    }
  }

  /** Keep `queue` requests waiting at this router (more demand than its share). */
  start(queue = 8): void {
    this.view.start();
    this.pump = setInterval(() => this.apply(this.pending.splice(0)), 1);
    this.feed = setInterval(() => {
      while (this.scheduler.queueLength < queue)
        this.apply(
          this.scheduler.submit(
            { id: `${this.id}-${this.seq++}`, model: 'm', api: 'ollama', arrivedAt: 0, promptText: '' },
            Date.now(),
          ),
        );
    }, 5);
  }

  /** kill -9 as Redis and the engines see it: no more rounds, no more dispatches, connection gone. */
  kill(): void {
    this.dead = true;
    this.stopLoad();
    this.redis.disconnect();
  }

  stopLoad(): void {
    this.view.stop();
    clearInterval(this.pump);
    clearInterval(this.feed);
  }
}

async function until(what: string, cond: () => boolean | Promise<boolean>, ms: number): Promise<number> {
  const t0 = Date.now();
  while (!(await cond())) {
    if (Date.now() - t0 > ms) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(5);
  }
  return Date.now() - t0;
}

describe('shared view faults (private redis-server)', () => {
  let redis: RedisServer;
  let admin: Redis;
  const routers: MiniRouter[] = [];
  const hops: CuttableHop[] = [];
  before(async () => {
    redis = await RedisServer.start();
  });
  after(async () => {
    for (const r of routers) r.kill();
    for (const h of hops) await h.close();
    admin?.disconnect();
    await redis.kill();
  });

  const fleetOf = (n: number, url = redis.url): { fleet: Fleet; rs: MiniRouter[] } => {
    const fleet = new Fleet();
    const rs = Array.from({ length: n }, (_, i) => new MiniRouter(`r${i}-${Date.now()}`, url, fleet));
    routers.push(...rs);
    return { fleet, rs };
  };
  const heldBy = async (id: string): Promise<number> => {
    if (!admin) {
      admin = new Redis(redis.url);
      admin.on('error', () => undefined);
    }
    let n = 0;
    for (const b of CAPS.keys()) if ((await admin.hexists(`faults:shared-view:${b}`, id)) === 1) n++;
    return n;
  };

  it('a router killed mid-run gives its held slots back within ttl + one round; the others take them', async () => {
    await redis.flushAll();
    const { fleet, rs } = fleetOf(3);
    for (const r of rs) r.start();
    await until('all up', () => rs.every((r) => r.view.up), 3000);
    await sleep(500);
    const [r0, r1, r2] = rs as [MiniRouter, MiniRouter, MiniRouter];
    assert.equal(await heldBy(r2.id), 2, 'the doomed router holds a share of both backends');
    r2.kill();
    const back = await until('its fields dropped', async () => (await heldBy(r2.id)) === 0, TTL + 1000);
    assert.ok(back <= TTL + 2 * INTERVAL + 50, `held slots returned after ${back} ms (ttl ${TTL})`);
    // The survivors' allowances grow to the whole cap (their queues want it).
    await until(
      'survivors hold the caps',
      () =>
        [...CAPS].every(
          ([b, cap]) =>
            r0.scheduler.backend(b)!.maxConcurrency + r1.scheduler.backend(b)!.maxConcurrency === cap,
        ),
      1000,
    );
    for (const r of [r0, r1]) r.stopLoad();
    assert.deepEqual(fleet.overCap(), []);
    await until('drained', () => [...fleet.open.values()].every((n) => n === 0), 3000);
    for (const r of [r0, r1]) r.kill();
  });

  it('FLUSHDB mid-run: the view rebuilds and no backend goes past its cap', async () => {
    await redis.flushAll();
    const { fleet, rs } = fleetOf(3);
    for (const r of rs) r.start();
    await until('all up', () => rs.every((r) => r.view.up), 3000);
    await sleep(300);
    fleet.resetPeaks();
    const before = fleet.done;
    for (let i = 0; i < 5; i++) {
      await redis.run((c) => c.flushdb());
      await sleep(300);
    }
    for (const r of rs) r.stopLoad();
    assert.ok(fleet.done - before > 50, `routing went on (${fleet.done - before} done)`);
    assert.ok(rs.every((r) => r.view.up));
    assert.deepEqual(fleet.overCap(), [], 'caps held through the flushes');
    await until('drained', () => [...fleet.open.values()].every((n) => n === 0), 3000);
    for (const r of rs) r.kill();
  });

  it('Redis unreachable: routing continues on own views (up false); after it returns the caps hold again', async () => {
    await redis.flushAll();
    const { fleet, rs } = fleetOf(3);
    for (const r of rs) r.start();
    await until('all up', () => rs.every((r) => r.view.up), 3000);
    await redis.kill();
    await until('all down', () => rs.every((r) => !r.view.up), 3000);
    const before = fleet.done;
    await sleep(500);
    assert.ok(fleet.done - before > 20, `routing continued degraded (${fleet.done - before} done)`);
    // Degraded: each router on its configured caps.
    assert.equal(rs[0]!.scheduler.backend('a')!.maxConcurrency, CAPS.get('a'));
    await redis.restart();
    await until('all up again', () => rs.every((r) => r.view.up), 5000);
    // What the outage let in drains; from then on the caps hold.
    await sleep(TTL);
    fleet.resetPeaks();
    await sleep(1000);
    for (const r of rs) r.stopLoad();
    assert.deepEqual(fleet.overCap(), [], 'caps held after recovery');
    assert.ok(fleet.done - before > 60);
    await until('drained', () => [...fleet.open.values()].every((n) => n === 0), 3000);
    for (const r of rs) r.kill();
  });

  it('one router cut off from Redis (not from its engines): it says so, the others stay up and take its share', async () => {
    await redis.flushAll();
    const hop = await tcpHop(redis.port);
    hops.push(hop);
    const { fleet: f1, rs: others } = fleetOf(2);
    const fleet = f1;
    const cutOff = new MiniRouter(`cut-${Date.now()}`, `redis://127.0.0.1:${hop.port}/0`, fleet);
    routers.push(cutOff);
    for (const r of [...others, cutOff]) r.start();
    await until('all up', () => [...others, cutOff].every((r) => r.view.up), 3000);
    await sleep(300);
    fleet.resetPeaks();
    hop.cut();
    await until('the cut router is down', () => !cutOff.view.up, 2000);
    // Until its fields expire the others count what it holds, and it keeps to its allowances.
    await sleep(TTL - 4 * INTERVAL);
    assert.deepEqual(fleet.overCap(), [], 'caps held while the others still count its share');
    const before = fleet.done;
    await sleep(300);
    assert.ok(
      others.every((r) => r.view.up),
      'the others still reach Redis',
    );
    assert.ok(cutOff.view.failures > 0);
    const back = await until('its share returned', async () => (await heldBy(cutOff.id)) === 0, TTL + 1000);
    assert.ok(back <= TTL + 2 * INTERVAL + 50);
    assert.ok(fleet.done - before > 20, 'everyone kept routing');
    hop.mend();
    await until('the cut router is back', () => cutOff.view.up, 5000);
    for (const r of [...others, cutOff]) r.stopLoad();
    await until('drained', () => [...fleet.open.values()].every((n) => n === 0), 3000);
    for (const r of [...others, cutOff]) r.kill();
  });
});
