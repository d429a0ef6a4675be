import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TaskStore } from './store.js';
import { migrate } from './sql.js';
import { BACKENDS, testSql } from './testing.js';

function clock(start = Date.UTC(2026, 0, 1)) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

for (const backend of BACKENDS) {
  test(`${backend}: migrations apply once and record themselves`, async (t) => {
    const sql = await testSql(t, backend);
    assert.deepEqual(await migrate(sql), [], 'already applied by testSql');
    const rows = await sql.query<{ name: string }>('SELECT name FROM llmlb_migrations');
    assert.deepEqual(
      rows.map((r) => r.name),
      ['001_tasks.sql'],
    );
  });

  test(`${backend}: many concurrent claimers never get the same task`, async (t) => {
    const sql = await testSql(t, backend);
    const store = new TaskStore(sql);
    const ids = await store.add(Array.from({ length: 200 }, (_, i) => ({ prompt: `p${i}`, model: 'm' })));
    const seen = new Map<number, string>();
    // 16 claimers racing, each taking 1–3 at a time until nothing is left.
    await Promise.all(
      Array.from({ length: 16 }, async (_, w) => {
        for (;;) {
          const got = await store.claim(`w${w}`, 1 + (w % 3));
          if (got.length === 0) return;
          for (const c of got) {
            assert.ok(!seen.has(c.task.id), `task ${c.task.id} claimed by ${seen.get(c.task.id)} and w${w}`);
            seen.set(c.task.id, `w${w}`);
            assert.equal(await store.complete(c, `a${c.task.id}`), true);
          }
        }
      }),
    );
    assert.equal(seen.size, ids.length);
    assert.deepEqual(await store.counts(), { queued: 0, running: 0, done: 200, dead: 0 });
  });

  test(`${backend}: a lapsed claim is taken over and the first worker can no longer finish it`, async (t) => {
    const sql = await testSql(t, backend);
    const c = clock();
    const store = new TaskStore(sql, { visibilityMs: 10_000, now: c.now });
    await store.add([{ prompt: 'hello' }]);
    const [a] = await store.claim('a');
    assert.ok(a);
    assert.deepEqual(await store.claim('b'), [], 'claimed and not lapsed: invisible');
    c.advance(9_000);
    assert.equal(await store.extend(a), true, 'heartbeat keeps it');
    c.advance(9_000);
    assert.deepEqual(await store.claim('b'), [], 'extended claim still held');
    c.advance(1_001);
    const [b] = await store.claim('b');
    assert.ok(b, 'lapsed claim becomes claimable');
    assert.equal(b.task.id, a.task.id);
    assert.equal(b.task.attempts, 2);
    assert.equal(await store.complete(a, 'late'), false, 'stale token refused');
    assert.equal(await store.extend(a), false);
    assert.equal(await store.fail(a, 'x'), null);
    assert.equal(await store.complete(b, 'right'), true);
    assert.equal(await store.complete(b, 'twice'), false, 'no second answer');
    const row = await store.get(a.task.id);
    assert.equal(row?.status, 'done');
    assert.equal(row?.answer, 'right');
    assert.equal(row?.claimedBy, 'b');
  });

  test(`${backend}: failures retry after a growing backoff, then dead-letter`, async (t) => {
    const sql = await testSql(t, backend);
    const c = clock();
    const store = new TaskStore(sql, {
      maxAttempts: 3,
      baseBackoffMs: 1_000,
      maxBackoffMs: 60_000,
      now: c.now,
      random: () => 0.999999,
    });
    const [id] = await store.add([{ prompt: 'flaky', model: 'm' }]);
    const delays: number[] = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      const [cl] = await store.claim('w');
      assert.ok(cl, `attempt ${attempt} claimable`);
      assert.equal(cl.task.attempts, attempt);
      const r = await store.fail(cl, `boom ${attempt}`);
      assert.ok(r);
      if (attempt < 3) {
        assert.equal(r.status, 'queued');
        delays.push(r.retryInMs);
        c.advance(r.retryInMs - 1);
        assert.deepEqual(await store.claim('w'), [], 'not before the backoff');
        assert.equal(await store.nextVisibleInMs(), 1);
        c.advance(1);
      } else {
        assert.equal(r.status, 'dead');
      }
    }
    assert.deepEqual(delays, [1000, 2000]);
    const row = await store.get(id!);
    assert.equal(row?.status, 'dead');
    assert.equal(row?.attempts, 3);
    assert.equal(row?.lastError, 'boom 3');
    c.advance(3_600_000);
    assert.deepEqual(await store.claim('w'), [], 'dead tasks are never claimed');
    assert.deepEqual(await store.counts(), { queued: 0, running: 0, done: 0, dead: 1 });
  });

  test(`${backend}: a task whose worker keeps dying is dead-lettered after the last attempt`, async (t) => {
    const sql = await testSql(t, backend);
    const c = clock();
    const store = new TaskStore(sql, { maxAttempts: 2, visibilityMs: 1_000, now: c.now });
    await store.add([{ prompt: 'poison' }]);
    assert.equal((await store.claim('a')).length, 1);
    c.advance(1_000);
    assert.equal((await store.claim('b')).length, 1);
    c.advance(1_000);
    assert.deepEqual(await store.claim('c'), []);
    const [row] = await store.all();
    assert.equal(row?.status, 'dead');
    assert.match(row?.lastError ?? '', /claim expired/);
  });

  test(`${backend}: release gives a claim back without spending an attempt; sources insert while claiming`, async (t) => {
    const sql = await testSql(t, backend);
    const store = new TaskStore(sql);
    await store.add([{ prompt: 'one' }]);
    const [a] = await store.claim('w');
    assert.ok(a);
    await store.add([{ prompt: 'two' }, { prompt: 'three', model: 'm2' }]);
    assert.equal(await store.release(a), true);
    const got = await store.claim('w', 10);
    assert.deepEqual(
      got.map((g) => [g.task.prompt, g.task.attempts, g.task.model]),
      [
        ['one', 1, null],
        ['two', 1, null],
        ['three', 1, 'm2'],
      ],
    );
    await assert.rejects(store.add([{ prompt: '' }]), /non-empty prompt/);
    assert.equal((await store.counts()).running, 3, 'the bad insert changed nothing');
  });
}
