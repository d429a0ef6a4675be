import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { SharedViewBook, type RoundEntry } from './shared-view-book.js';
import { redisViewTransport } from './shared-view.js';

const URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';

describe('SharedViewBook (the cluster primary’s book) answers as the Redis round does', () => {
  const redis = new Redis(URL, { maxRetriesPerRequest: 1 });
  after(() => redis.disconnect());

  it('the same 400 rounds of 3 routers on 3 backends: identical answers, and caps never over-allotted', async () => {
    const prefix = `llmlb-book-test-${process.pid}-${Date.now()}`;
    const lua = redisViewTransport(redis, prefix);
    const book = new SharedViewBook();
    const caps = [2, 5, -1];
    const routers = ['r0', 'r1', 'r2'];
    const enforced = new Map<string, number[]>(routers.map((r) => [r, caps.map((c) => (c < 0 ? -1 : 0))]));
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
      const entries: RoundEntry[] = caps.map((cap, i) => {
        const inFlight = cap < 0 ? rnd(6) : Math.min(rnd(4), Math.max(0, mine[i]!));
        return { key: `b${i}`, inFlight, cap, want: inFlight + rnd(3), enforced: mine[i]! };
      });
      const fromLua = await lua.round(id, now, 10_000, entries);
      const fromBook = book.round(id, now, 10_000, entries);
      assert.deepEqual(fromBook, fromLua, `round ${round}`);
      fromBook.forEach(([, allowance], i) => {
        if (allowance >= 0) mine[i] = allowance;
      });
      caps.forEach((cap, i) => {
        if (cap >= 0) assert.ok(book.held(`b${i}`) <= cap, `b${i} over-allotted`);
      });
    }
    await redis.del(...caps.map((_, i) => `${prefix}:shared-view:b${i}`));
  });

  it('drop returns a gone router’s share at once', () => {
    const book = new SharedViewBook();
    const e = (inFlight: number, want: number, enforcedNow: number): RoundEntry[] => [
      { key: 'a', inFlight, cap: 4, want, enforced: enforcedNow },
    ];
    assert.deepEqual(book.round('w1', 0, 2000, e(3, 4, 0)), [[0, 4, 0]]);
    assert.deepEqual(book.round('w2', 1, 2000, e(0, 2, 0)), [[3, 0, 0]]);
    book.drop('w1');
    // w2's own entry is there (third field 1): w1's share came back at once.
    assert.deepEqual(book.round('w2', 2, 2000, e(0, 2, 0)), [[0, 2, 1]]);
  });
});
