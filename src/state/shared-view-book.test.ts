import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { SharedViewBook, type Grant, type RoundEntry } from './shared-view-book.js';
import { redisViewTransport } from './shared-view.js';

const URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';

describe('SharedViewBook (the cluster primary’s book) answers as the Redis round does', () => {
  const redis = new Redis(URL, { maxRetriesPerRequest: 1 });
  after(() => redis.disconnect());

  it('the same 400 rounds of 3 routers on 3 backends: identical answers and hand-overs, caps never exceeded', async () => {
    const prefix = `llmlb-book-test-${process.pid}-${Date.now()}`;
    const sub = new Redis(URL, { maxRetriesPerRequest: 1 });
    const heard: Grant[] = [];
    const lua = redisViewTransport(redis, prefix, sub);
    lua.grants!((g) => heard.push(g));
    await new Promise((r) => setTimeout(r, 100)); // subscribed
    const made: Grant[] = [];
    const caps = [2, 5, -1];
    const routers = ['r0', 'r1', 'r2'];
    // r0 and r1 take hand-overs, r2 does not (a router without sharedState).
    const takes = new Set(['r0', 'r1']);
    const enforced = new Map<string, number[]>(routers.map((r) => [r, caps.map((c) => (c < 0 ? -1 : 0))]));
    const taken = new Map<string, number[]>(routers.map((r) => [r, caps.map(() => 0)]));
    // Each router applies a hand-over as SharedView.grant does: at once, once.
    const book = new SharedViewBook((g) => {
      made.push(g);
      const i = Number(g.key.slice(1));
      const t = taken.get(g.router)!;
      if (g.granted > t[i]!) {
        enforced.get(g.router)![i]! += g.granted - t[i]!;
        t[i] = g.granted;
      }
    });
    let seed = 7;
    const rnd = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    let now = 1_000_000;
    for (let round = 0; round < 400; round++) {
      now += 1 + rnd(40);
      const id = routers[rnd(3)]!;
      // A router dispatches only under the allowance it enforces (the invariant both rely on).
      const mine = enforced.get(id)!;
      const t = taken.get(id)!;
      const entries: RoundEntry[] = caps.map((cap, i) => {
        const inFlight = cap < 0 ? rnd(6) : Math.min(rnd(4), Math.max(0, mine[i]!));
        return {
          key: `b${i}`,
          inFlight,
          cap,
          want: inFlight + rnd(3),
          enforced: mine[i]!,
          ...(takes.has(id) ? { taken: t[i]!, waitedMs: rnd(3) === 0 ? 0 : rnd(500) } : {}),
        };
      });
      const fromLua = await lua.round(id, now, 10_000, entries);
      const fromBook = book.round(id, now, 10_000, entries);
      assert.deepEqual(fromBook, fromLua, `round ${round}`);
      fromBook.forEach(([, allowance, , granted], i) => {
        if (allowance < 0) return;
        mine[i] = allowance + Math.max(0, t[i]! - granted);
        t[i] = Math.max(t[i]!, granted);
      });
      caps.forEach((cap, i) => {
        if (cap < 0) return;
        assert.ok(book.held(`b${i}`) <= cap, `b${i} over-allotted`);
        const used = routers.reduce((n, r) => n + enforced.get(r)![i]!, 0);
        assert.ok(used <= cap, `b${i}: the routers enforce ${used} > cap ${cap} (round ${round})`);
      });
    }
    await new Promise((r) => setTimeout(r, 200)); // the last hand-overs heard
    sub.disconnect();
    assert.ok(made.length >= 10, `hand-overs made: ${made.length}`);
    assert.ok(made.every((g) => takes.has(g.router)));
    assert.deepEqual(heard, made, 'the Lua published the hand-overs the book made');
    await redis.del(
      ...caps.flatMap((_, i) => [`${prefix}:shared-view:b${i}`, `${prefix}:shared-view-asks:b${i}`]),
    );
  });

  it('a hand-over goes to the router whose ask is most unmet, and not to one that takes none', () => {
    const made: Grant[] = [];
    const book = new SharedViewBook((g) => made.push(g));
    const e = (inFlight: number, want: number, enforcedNow: number, taken?: number): RoundEntry[] => [
      { key: 'a', inFlight, cap: 4, want, enforced: enforcedNow, ...(taken === undefined ? {} : { taken }) },
    ];
    assert.deepEqual(book.round('w1', 0, 2000, e(4, 4, 0, 0)), [[0, 4, 0, 0]]);
    assert.deepEqual(book.round('w2', 1, 2000, e(0, 1, 0, 0)), [[4, 0, 0, 0]]);
    assert.deepEqual(book.round('w3', 2, 2000, e(0, 2, 0, 0)), [[4, 0, 0, 0]]);
    assert.deepEqual(book.round('w4', 3, 2000, e(0, 3, 0)), [[4, 0, 0, 0]]);
    // w1 is down to 1 in flight and gives 3 back (it enforces 1 from now: SharedView shrinks
    // before the round): w3 (2 unmet) first, then w2; w4 takes none.
    assert.deepEqual(book.round('w1', 4, 2000, e(1, 1, 1, 0)), [[0, 1, 1, 0]]);
    assert.deepEqual(made, [
      { router: 'w3', key: 'a', granted: 2 },
      { router: 'w2', key: 'a', granted: 1 },
    ]);
    assert.equal(book.held('a'), 4);
    // w2 heard its hand-over (taken 1): its round keeps the slot; w3 has not yet: the book still
    // counts both of its slots (it may apply them before this round's answer reaches it).
    assert.deepEqual(book.round('w2', 5, 2000, e(1, 1, 1, 1)), [[1, 1, 1, 1]]);
    assert.deepEqual(book.round('w3', 6, 2000, e(0, 0, 0, 0)), [[2, 0, 1, 2]]);
    assert.equal(book.held('a'), 4);
    assert.deepEqual(book.round('w1', 7, 2000, e(1, 4, 1, 0)), [[1, 1, 1, 0]], 'no slot twice');
  });

  it('a freed slot goes to the router whose oldest waiting request has waited longest, a slot each before any twice', () => {
    const made: Grant[] = [];
    const book = new SharedViewBook((g) => made.push(g));
    const e = (inFlight: number, want: number, enforcedNow: number, waitedMs = 0): RoundEntry[] => [
      { key: 'a', inFlight, cap: 3, want, enforced: enforcedNow, taken: 0, waitedMs },
    ];
    assert.deepEqual(book.round('w1', 1000, 2000, e(3, 3, 0)), [[0, 3, 0, 0]]);
    // w2 has 3 requests waiting, the oldest for 50 ms; w3 one, waiting for 400 ms; w4 one, untold.
    assert.deepEqual(book.round('w2', 1001, 2000, e(0, 3, 0, 50)), [[3, 0, 0, 0]]);
    assert.deepEqual(book.round('w3', 1002, 2000, e(0, 1, 0, 400)), [[3, 0, 0, 0]]);
    assert.deepEqual(book.round('w4', 1003, 2000, e(0, 1, 0)), [[3, 0, 0, 0]]);
    // w1 frees one slot: the longest waiter (w3) gets it, not the most unmet (w2).
    assert.deepEqual(book.round('w1', 1010, 2000, e(2, 2, 2)), [[0, 2, 1, 0]]);
    assert.deepEqual(made, [{ router: 'w3', key: 'a', granted: 1 }]);
    // Two more: w2 (told a wait) before w4 (untold); a slot each before any twice.
    made.length = 0;
    assert.deepEqual(book.round('w1', 1020, 2000, e(0, 0, 0)), [[0, 0, 1, 0]]);
    assert.deepEqual(made, [
      { router: 'w2', key: 'a', granted: 1 },
      { router: 'w4', key: 'a', granted: 1 },
    ]);
    assert.equal(book.held('a'), 3);
  });

  it('drop returns a gone router’s share at once', () => {
    const book = new SharedViewBook();
    const e = (inFlight: number, want: number, enforcedNow: number): RoundEntry[] => [
      { key: 'a', inFlight, cap: 4, want, enforced: enforcedNow },
    ];
    assert.deepEqual(book.round('w1', 0, 2000, e(3, 4, 0)), [[0, 4, 0, 0]]);
    assert.deepEqual(book.round('w2', 1, 2000, e(0, 2, 0)), [[3, 0, 0, 0]]);
    book.drop('w1');
    // w2's own entry is there (third field 1): w1's share came back at once.
    assert.deepEqual(book.round('w2', 2, 2000, e(0, 2, 0)), [[0, 2, 1, 0]]);
  });
});
