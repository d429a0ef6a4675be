/**
 * Shared state between live routers (issue #31, item 2; src/state/shared-state.ts) over real
 * Redis pub/sub: the shared 127.0.0.1:6379 for the sharing itself (the test fails, loudly, when it
 * is absent), a private redis-server that the tests kill for the outage. Routers are reduced to a
 * scheduler whose prefix-trie policy is wired as Router.sharing() wires it: its pushes and answers
 * published, the others' applied to its policy.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createPolicy } from '../src/core/policies/index.js';
import { Scheduler } from '../src/core/scheduler.js';
import { EventEmitter } from 'node:events';
import type { BackendView, Decision, Policy, RequestInfo } from '../src/core/types.js';
import {
  STATE,
  STATE_GONE,
  StateRelay,
  clusterStateTransport,
  type ClusterMessage,
} from '../src/state/cluster-view.js';
import { withSharedView } from '../src/federation/shared-view-policy.js';
import { parseConfig, type ParseOptions } from '../src/config/load.js';
import { configIssues } from '../src/config/testing.js';
import { RedisServer } from '../src/state/redis-server.testing.js';
import { SharedState, parseBatch, redisStateTransport } from '../src/state/shared-state.js';

const SHARED_URL = 'redis://127.0.0.1:6379/0';
const BACKENDS = ['a', 'b', 'c', 'd'];
const HEARTBEAT = 50;
const TTL = 400;

const connect = (url: string): Redis => {
  const r = new Redis(url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: false });
  r.on('error', () => undefined);
  return r;
};

/** One router: a prefix-trie scheduler over four uncapped backends, sharing through `url`. */
class MiniRouter {
  readonly scheduler: Scheduler;
  readonly state: SharedState;
  readonly pub: Redis;
  readonly sub: Redis;
  readonly inner: Policy;
  readonly decisions: Decision[] = [];
  private seq = 0;

  constructor(
    readonly id: string,
    url: string,
    prefix: string,
    opts: { maxPending?: number } = {},
  ) {
    this.pub = connect(url);
    this.sub = connect(url);
    this.inner = createPolicy({ name: 'prefix-trie' }, () => 0.5);
    this.state = new SharedState(
      redisStateTransport(this.pub, this.sub, prefix),
      {
        backend: (n) => this.scheduler.backend(n),
        remoteDispatch: (req, b) => this.inner.onDispatch?.(req, b, performance.now()),
        remoteComplete: (req, b, r) => this.inner.onComplete?.(req, b, r, performance.now()),
        changed: (names) => {
          for (const n of names)
            this.decisions.push(...this.scheduler.updateBackend(n, {}, performance.now()));
        },
      },
      { routerId: id, heartbeatMs: HEARTBEAT, ttlMs: TTL, ...opts },
    );
    const wrapped = withSharedView(this.inner, this.state.othersOf, this.state.othersSince);
    const out: { -readonly [K in keyof Policy]: Policy[K] } = wrapped;
    const onDispatch = wrapped.onDispatch;
    const onComplete = wrapped.onComplete;
    out.onDispatch = (req, b, at) => {
      onDispatch?.(req, b, at);
      this.state.published(req, b.name);
    };
    out.onComplete = (req, b, report, at) => {
      onComplete?.(req, b, report, at);
      this.state.answered(req, b.name, report);
    };
    this.scheduler = new Scheduler({ policy: wrapped });
    for (const name of BACKENDS)
      this.scheduler.addBackend({ name, api: 'openai', models: ['m'], maxConcurrency: 100, weight: 1 });
  }

  async ready(): Promise<void> {
    this.state.start();
    const t0 = Date.now();
    while (this.sub.status !== 'ready' || this.pub.status !== 'ready') {
      if (Date.now() - t0 > 3000) throw new Error(`${this.id}: Redis not reachable`);
      await sleep(10);
    }
    await sleep(50); // the subscription is in
  }

  /** Submit a request with this prompt; returns the backend it went to. */
  send(prompt: string): { id: string; backend: string } {
    const req: RequestInfo = {
      id: String(this.seq++),
      model: 'm',
      api: 'openai',
      arrivedAt: performance.now(),
      promptText: prompt,
    };
    const ds = this.scheduler.submit(req, performance.now());
    const d = ds.find((x) => x.type === 'dispatch' && x.request.id === req.id);
    assert.ok(d && d.type === 'dispatch', 'dispatched');
    return { id: req.id, backend: d.backend };
  }

  finish(id: string): void {
    const t = performance.now();
    this.scheduler.complete(id, { ok: true, dispatchedAt: t - 10, firstByteAt: t - 5, finishedAt: t }, t);
  }

  close(): void {
    this.state.stop();
    this.pub.disconnect();
  }
}

async function until(what: string, cond: () => boolean, ms: number): Promise<number> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(5);
  }
  return Date.now() - t0;
}

const SYSTEM = (g: number): string =>
  `System ${g}: ` + `you are a careful assistant number ${g}. `.repeat(60);

describe('shared state over Redis pub/sub (real Redis on 127.0.0.1:6379)', () => {
  const prefix = `test-shared-state-${process.pid}-${Date.now()}`;
  let a: MiniRouter;
  let b: MiniRouter;
  before(async () => {
    const probe = new Redis(SHARED_URL, { maxRetriesPerRequest: 1, connectTimeout: 2000 });
    try {
      assert.equal(await probe.ping(), 'PONG', 'Redis must be running on 127.0.0.1:6379 for this test');
    } finally {
      probe.disconnect();
    }
    a = new MiniRouter('A', SHARED_URL, prefix);
    b = new MiniRouter('B', SHARED_URL, prefix);
    await Promise.all([a.ready(), b.ready()]);
  });
  after(() => {
    a.close();
    b.close();
  });

  it("a router's pushes reach the other's policy: its prefix trie sends the same prefix to the same backend", async () => {
    // Each system prompt first goes through A; B, sent the same prefixes, must follow A's choices.
    const placed = new Map<number, string>();
    for (let g = 0; g < 4; g++) placed.set(g, a.send(`${SYSTEM(g)}\nQuestion A${g}`).backend);
    assert.equal(new Set(placed.values()).size, 4, 'A spread the four prefixes (least loaded)');
    await until('B hears A’s four pushes', () => BACKENDS.every((n) => b.state.othersOf(n) === 1), 2000);
    for (let g = 0; g < 4; g++)
      assert.equal(b.send(`${SYSTEM(g)}\nQuestion B${g}`).backend, placed.get(g), `prefix ${g} on B`);
    // A hears B's pushes in turn: two requests in flight on each backend, seen from either side.
    await until('A hears B’s pushes', () => BACKENDS.every((n) => a.state.othersOf(n) === 1), 2000);
  });

  it('answers leave the counts; bytes and messages are counted', async () => {
    for (let i = 0; i < 4; i++) a.finish(String(i));
    await until('B hears A’s answers', () => BACKENDS.every((n) => b.state.othersOf(n) === 0), 2000);
    assert.ok(a.state.stats.publishedBytes > 4 * SYSTEM(0).length, 'the prompts went out');
    assert.ok(b.state.stats.received >= 2);
    assert.equal(b.state.stats.unmatched, 0);
  });

  it('malformed messages on the channel are counted and ignored', async () => {
    const before = b.state.stats.malformed;
    const pub = new Redis(SHARED_URL, { maxRetriesPerRequest: 1 });
    try {
      const ch = `${prefix}:shared-state`;
      for (const m of [
        'not json',
        '{"v":1}',
        JSON.stringify({ v: 1, r: 'X', s: 1, e: [{ k: 'd', id: '1', b: 'a' }] }),
        JSON.stringify({ v: 1, r: 'X', s: 1, e: [], c: { a: -1 } }),
        JSON.stringify({ v: 2, r: 'X', s: 1, e: [] }),
      ])
        await pub.publish(ch, m);
    } finally {
      pub.disconnect();
    }
    await until('malformed counted', () => b.state.stats.malformed - before === 5, 2000);
    assert.equal(b.state.othersOf('a'), 0);
    assert.equal(parseBatch(JSON.stringify({ v: 1, r: 'X', s: 1, e: [] }))?.r, 'X');
  });

  it('a lost answer is squared by the next heartbeat', async () => {
    const { id, backend } = a.send(`${SYSTEM(7)}\nQuestion lost`);
    await until('B hears the push', () => b.state.othersOf(backend) === 1, 2000);
    // The answer never goes out (as if its message were lost): A's counts say 0 at the heartbeat.
    const answered = a.state.answered.bind(a.state);
    a.state.answered = (req, be, r) => {
      // Counted as answered at A, but the event is not sent.
      (a.state as unknown as { mine: Map<string, number> }).mine.set(be, 0);
      void req;
      void r;
    };
    a.finish(id);
    a.state.answered = answered;
    await until('B squares its count with A’s heartbeat', () => b.state.othersOf(backend) === 0, 1000);
    assert.ok(b.state.stats.reconciled >= 1);
  });

  it("a dead router's requests leave the others' counts within ttl", async () => {
    const c = new MiniRouter('C', SHARED_URL, prefix);
    await c.ready();
    const { backend } = c.send(`${SYSTEM(5)}\nQuestion C`);
    await until('B hears C', () => b.state.othersOf(backend) >= 1, 2000);
    const expired = b.state.stats.expired;
    // kill -9 as the others see it: nothing more from C.
    c.state.stop();
    c.pub.disconnect();
    const took = await until('C presumed gone', () => b.state.stats.expired > expired, 3000);
    assert.equal(b.state.othersOf(backend), 0);
    assert.ok(took <= TTL + 3 * HEARTBEAT, `took ${took} ms`);
  });
});

describe('shared state: Redis unreachable (private redis-server, killed)', () => {
  let server: RedisServer;
  let r: MiniRouter;
  before(async () => {
    server = await RedisServer.start();
    r = new MiniRouter('R', server.url, 'outage', { maxPending: 50 });
    await r.ready();
  });
  after(async () => {
    r.close();
    await server.kill();
  });

  it('routing continues on local state, publishes fail and are counted, nothing piles up', async () => {
    await server.kill();
    await until('connection down', () => r.pub.status !== 'ready', 3000);
    const placed = new Map<number, string>();
    for (let i = 0; i < 400; i++) {
      const g = i % 4;
      const { id, backend } = r.send(`${SYSTEM(g)}\nQuestion ${i}`);
      if (placed.has(g)) assert.equal(backend, placed.get(g), 'its own trie still routes');
      placed.set(g, backend);
      r.finish(id);
      if (i % 50 === 0) await sleep(1);
    }
    await sleep(3 * HEARTBEAT);
    assert.ok(r.state.stats.publishFailures > 0, 'publishes failed');
    assert.equal(r.state.up, false);
    const pending = (r.state as unknown as { pending: unknown[] }).pending.length;
    assert.ok(pending <= 50, `pending ${pending} ≤ maxPending`);
    await server.restart();
    await until('publishing again', () => r.state.up, 5000);
  });
});

describe('shared state over the cluster primary (serve --workers N): IPC relay', () => {
  it("a worker's batches reach the other worker through the primary's relay, not itself", async () => {
    // Two workers' ends of IPC; the primary relays STATE messages to every other worker.
    const ends = [new EventEmitter(), new EventEmitter()].map((em, i, all) =>
      Object.assign(em, {
        send(m: ClusterMessage): boolean {
          // The primary: relayed as is to the other worker, asynchronously as IPC is.
          if (m.t === STATE) setImmediate(() => all[1 - i]!.emit('message', m));
          return true;
        },
      }),
    );
    const got: string[][] = [[], []];
    const states = ends.map(
      (end, i) =>
        new SharedState(
          clusterStateTransport(end),
          {
            backend: (n) =>
              n === 'a'
                ? ({ name: 'a', inFlight: 0, maxConcurrency: 4 } as unknown as BackendView)
                : undefined,
            remoteDispatch: (req) => got[i]!.push(req.id),
            remoteComplete: () => undefined,
            changed: () => undefined,
          },
          { routerId: `w${i}`, heartbeatMs: 1000 },
        ),
    );
    for (const s of states) s.start();
    try {
      const req: RequestInfo = { id: '7', model: 'm', api: 'openai', arrivedAt: 0, promptText: 'hello' };
      states[0]!.published(req, 'a');
      await until('worker 1 hears worker 0', () => got[1]!.length === 1, 1000);
      assert.deepEqual(got, [[], ['w0/7']]);
      assert.equal(states[1]!.othersOf('a'), 1);
      // Garbage over IPC is counted, not applied.
      ends[1]!.emit('message', { t: STATE, seq: 0, payload: '{"v":1,"r":"x"' });
      assert.equal(states[1]!.stats.malformed, 1);
    } finally {
      for (const s of states) s.stop();
    }
  });

  it("a worker's exit, told by the primary, drops its pushes at once (not after ttl), and its late batches", async () => {
    const end = new EventEmitter();
    const completed: { id: string; ok: boolean }[] = [];
    let changedCalls = 0;
    const view = { name: 'a', inFlight: 0, maxConcurrency: 4 } as unknown as BackendView;
    const s = new SharedState(
      clusterStateTransport(Object.assign(end, { send: () => true })),
      {
        backend: (n) => (n === 'a' ? view : undefined),
        remoteDispatch: () => undefined,
        remoteComplete: (req, _b, r) => completed.push({ id: req.id, ok: r.ok }),
        changed: () => void changedCalls++,
      },
      // A ttl far beyond the test: only the notice can drop worker-2.
      { routerId: 'worker-1', heartbeatMs: 1000, ttlMs: 60_000 },
    );
    s.start();
    const batch = (seq: number, ids: string[]): string =>
      JSON.stringify({
        v: 1,
        r: 'worker-2',
        s: seq,
        e: ids.map((id) => ({ k: 'd', id, b: 'a', m: 'm', a: 'openai', t: 0, p: 'x', n: 1 })),
      });
    try {
      end.emit('message', { t: STATE, seq: 0, payload: batch(1, ['1', '2', '3']) });
      assert.equal(s.othersOf('a'), 3);
      assert.equal(s.othersInFlight, 3);
      assert.equal(s.stats.remoteDispatched, 3);
      assert.equal(s.liveRouters, 1);
      const before = changedCalls;
      // Another router's notice, or this router's own id, changes nothing.
      end.emit('message', { t: STATE_GONE, seq: 0, router: 'worker-9' });
      end.emit('message', { t: STATE_GONE, seq: 0, router: 'worker-1' });
      assert.equal(s.othersOf('a'), 3);
      end.emit('message', { t: STATE_GONE, seq: 0, router: 'worker-2' });
      assert.equal(s.othersOf('a'), 0, 'dropped synchronously on the notice');
      assert.equal(s.othersInFlight, 0);
      assert.equal(s.liveRouters, 0);
      assert.equal(s.stats.departed, 1);
      assert.equal(s.stats.expired, 0);
      assert.ok(changedCalls > before, 'a hold on load is asked again');
      // Its policy hears each open request end, failed.
      assert.deepEqual(
        completed,
        ['1', '2', '3'].map((id) => ({ id: `worker-2/${id}`, ok: false })),
      );
      // A batch of it still in transit (relayed before the exit) does not bring it back.
      end.emit('message', { t: STATE, seq: 0, payload: batch(2, ['4']) });
      assert.equal(s.othersOf('a'), 0);
      assert.equal(s.liveRouters, 0);
    } finally {
      s.stop();
    }
  });
});

describe("the primary's relay (serve --workers N): bounded per worker", () => {
  /** A worker whose pipe takes a message only when `drain` says so (a stalled one never does). */
  const target = () => {
    const waiting: ((e: Error | null) => void)[] = [];
    const got: ClusterMessage[] = [];
    return {
      got,
      connected: true,
      send(m: ClusterMessage, cb: (e: Error | null) => void): boolean {
        got.push(m);
        waiting.push(cb);
        return true;
      },
      isConnected(): boolean {
        return this.connected;
      },
      drain(n = waiting.length, err: Error | null = null): void {
        for (const cb of waiting.splice(0, n)) cb(err);
      },
    };
  };
  const msg = (i: number): ClusterMessage => ({ t: STATE, seq: 0, payload: `batch ${i}` });

  it('a stalled worker gets at most maxMessages, the rest are dropped and counted; a reading one gets all', () => {
    const relay = new StateRelay<ReturnType<typeof target>>(3, 1 << 20);
    const stalled = target();
    const reading = target();
    for (let i = 0; i < 10; i++) {
      relay.relay(stalled, msg(i), 7);
      relay.relay(reading, msg(i), 7);
      reading.drain();
    }
    assert.deepEqual(
      stalled.got.map((m) => m.payload),
      ['batch 0', 'batch 1', 'batch 2'],
    );
    assert.equal(reading.got.length, 10);
    assert.deepEqual(relay.stats, { relayed: 13, dropped: 7 });
    assert.equal(relay.backlog, 3);
    // The worker reads again: it gets new batches (those dropped are gone: a gap, squared by heartbeats).
    stalled.drain(2);
    assert.equal(relay.backlog, 1);
    assert.equal(relay.relay(stalled, msg(10), 7), true);
    assert.equal(relay.relay(stalled, msg(11), 7), true);
    assert.equal(relay.relay(stalled, msg(12), 7), false);
    // A write that failed (the pipe closed) leaves the backlog too, once.
    stalled.drain(1, new Error('EPIPE'));
    assert.equal(relay.backlog, 2);
  });

  it('bounded in bytes too; a gone worker is forgotten; a disconnected one gets nothing', () => {
    const relay = new StateRelay<ReturnType<typeof target>>(1000, 100);
    const t = target();
    assert.equal(relay.relay(t, msg(0), 60), true);
    assert.equal(relay.relay(t, msg(1), 60), false, '120 bytes > 100');
    assert.equal(relay.relay(t, msg(2), 40), true);
    assert.equal(relay.backlog, 2);
    relay.forget(t);
    assert.equal(relay.backlog, 0);
    t.drain(); // late callbacks of a forgotten worker change nothing
    assert.equal(relay.backlog, 0);
    t.connected = false;
    assert.equal(relay.relay(t, msg(3), 1), false);
    assert.equal(t.got.length, 2);
  });
});

describe('sharedState config', () => {
  const opts: ParseOptions = { knownPolicies: ['estimated-wait'], source: 't.yaml' };
  const base =
    "backends:\n  - name: a\n    url: http://127.0.0.1:11434\nsharedView: { redis: 'redis://127.0.0.1:6379/0' }\n";
  it('takes its defaults, and is refused with an unknown key or a bad value', () => {
    assert.deepEqual(parseConfig(`${base}sharedState: {}\n`, opts).sharedState, {
      promptChars: 32768,
      heartbeatMs: 200,
      ttlMs: 1500,
    });
    assert.equal(parseConfig(base, opts).sharedState, undefined);
    assert.deepEqual(
      configIssues(`${base}sharedState: { heartbeatMs: 1 }\n`, opts).map((i) => i.path),
      ['sharedState.heartbeatMs'],
    );
    assert.equal(configIssues(`${base}sharedState: { nope: 1 }\n`, opts).length, 1);
  });
});
