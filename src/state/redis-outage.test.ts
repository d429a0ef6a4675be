/**
 * Issue 16, defect 3: Redis losing what it holds (FLUSHALL, restart without persistence, a
 * failover that rolls back writes) and Redis outages, against a private redis-server that the
 * tests flush, kill, pause and restart.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { LeaseNotFoundError, type AdmitResult, type QuotaLimits } from '../core/quota/index.js';
import { StoreUnavailableError, type StoreEvent } from './quota-store.js';
import { RedisQuotaStore, type RedisQuotaStoreOptions } from './redis-quota-store.js';
import { RedisServer } from './redis-server.testing.js';

let server: RedisServer;
before(async () => {
  server = await RedisServer.start();
});
after(async () => {
  await server.kill();
});

const L = (over: Partial<QuotaLimits> = {}): QuotaLimits => ({
  weight: 1,
  maxConcurrent: 8,
  tokensPerMinute: 1_000_000,
  requestsPerMinute: 10_000,
  ...over,
});
const GRACE = 150;
let n = 0;

async function open(
  limits: Record<string, QuotaLimits>,
  over: RedisQuotaStoreOptions = {},
  prefix = `t${++n}:{q}:`,
): Promise<RedisQuotaStore> {
  return RedisQuotaStore.connect(server.url, limits, {
    prefix,
    recoveryGraceMs: GRACE,
    commandTimeoutMs: 300,
    probeIntervalMs: 50,
    ...over,
  });
}

function id(r: AdmitResult): string {
  assert.equal(r.kind, 'admitted', JSON.stringify(r));
  return r.kind === 'admitted' ? r.lease.id : '';
}

const sleep = (ms: number): Promise<void> => new Promise((res) => setTimeout(res, ms));

/** Whether `p` settles as a rejection before the event loop's next turn, i.e. without any I/O. */
async function rejectsAtOnce(p: Promise<unknown>): Promise<boolean> {
  const turn = new Promise<'pending'>((res) => setImmediate(() => res('pending')));
  return (
    (await Promise.race([
      p.then(
        () => 'resolved',
        () => 'rejected',
      ),
      turn,
    ])) === 'rejected'
  );
}

async function until(cond: () => boolean | Promise<boolean>, ms = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

test('FLUSHALL with 8 of 8 leases held: the limits come back, the 9th waits, the 8 complete, admissions resume', async () => {
  const s = await open({ m: L() });
  try {
    const held = [];
    for (let i = 0; i < 8; i++) held.push(id(await s.acquire({ tokens: 10, model: 'm' })));
    await server.flushAll();
    const r = await s.acquire({ tokens: 10, model: 'm' });
    assert.equal(r.kind, 'wait', 'not "no quota is configured", and not a 9th admission');
    await sleep(GRACE + 20);
    const again = await s.acquire({ tokens: 10, model: 'm' });
    assert.ok(again.kind === 'wait' && again.reason === 'concurrency', JSON.stringify(again));
    const snap = (await s.snapshot())[0]!;
    assert.deepEqual([snap.model, snap.inFlight, snap.limits.maxConcurrent], ['m', 8, 8]);
    // The window re-charged with this replica's admissions of the last minute.
    assert.equal(snap.windowRequests, 8);
    assert.equal(s.health().reseeds, 1);
    assert.equal(s.health().reregistered, 8);
    for (const x of held) assert.equal((await s.complete(x)).model, 'm');
    id(await s.acquire({ tokens: 10, model: 'm' }));
    assert.equal((await s.snapshot())[0]!.inFlight, 1);
  } finally {
    await s.close();
  }
});

test('two replicas, FLUSHALL: each puts its own leases back (the other notices on its reclaimer pass)', async () => {
  const prefix = `shared${++n}:{q}:`;
  const events: StoreEvent[] = [];
  const a = await open({ m: L() }, {}, prefix);
  const b = await open({ m: L() }, { onEvent: (e) => events.push(e) }, prefix);
  try {
    const onA = [
      id(await a.acquire({ tokens: 1, model: 'm' })),
      id(await a.acquire({ tokens: 1, model: 'm' })),
    ];
    const onB = [];
    for (let i = 0; i < 6; i++) onB.push(id(await b.acquire({ tokens: 1, model: 'm' })));
    await server.flushAll();
    assert.equal((await a.acquire({ tokens: 1, model: 'm' })).kind, 'wait', 'A rebuilt the state: grace');
    await b.reclaimExpired(); // B's periodic pass finds the new epoch and adds its 6
    assert.deepEqual(events, [{ kind: 'reregistered', leases: 6 }]);
    await sleep(GRACE + 20);
    assert.equal((await a.snapshot())[0]!.inFlight, 8);
    assert.equal((await a.acquire({ tokens: 1, model: 'm' })).kind, 'wait', 'still 8 of 8');
    // Leases complete on either replica after the loss.
    for (const x of onB) await a.complete(x);
    for (const x of onA) await b.complete(x);
    assert.equal((await b.snapshot())[0]!.inFlight, 0);
    id(await b.acquire({ tokens: 1, model: 'm' }));
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test('a heartbeat right after a FLUSHALL finds its lease (put back first), never "not found"', async () => {
  const s = await open({ m: L() });
  try {
    const x = id(await s.acquire({ tokens: 1, model: 'm' }));
    await server.flushAll();
    const l = await s.heartbeat(x);
    assert.equal(l.id, x);
    assert.equal((await s.snapshot())[0]!.inFlight, 1);
  } finally {
    await s.close();
  }
});

test('limits changed by an admin on another replica survive the loss (last seen in Redis)', async () => {
  const prefix = `patch${++n}:{q}:`;
  const a = await open({ m: L() }, {}, prefix);
  const b = await open({ m: L() }, {}, prefix);
  try {
    await a.setLimits('m', { maxConcurrent: 3 });
    await b.snapshot(); // B has seen the change
    await server.flushAll();
    assert.equal((await b.snapshot())[0]!.limits.maxConcurrent, 3);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test('leases completed on another replica are forgotten by the reclaimer pass, not resurrected by a loss', async () => {
  const prefix = `prune${++n}:{q}:`;
  const a = await open({ m: L() }, {}, prefix);
  const b = await open({ m: L() }, {}, prefix);
  try {
    const [x, y] = [
      id(await a.acquire({ tokens: 1, model: 'm' })),
      id(await a.acquire({ tokens: 1, model: 'm' })),
    ];
    await b.complete(x!);
    await a.reclaimExpired();
    await server.flushAll();
    assert.equal((await a.snapshot())[0]!.inFlight, 1);
    await a.complete(y!);
    await assert.rejects(a.complete(x!), LeaseNotFoundError);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test('a failover that rolls back writes (version goes backwards) is rebuilt from the lease tables', async () => {
  const s = await open({ m: L() });
  try {
    const k = s.keys;
    id(await s.acquire({ tokens: 1, model: 'm' }));
    id(await s.acquire({ tokens: 1, model: 'm' }));
    const dumps = await server.run((r) =>
      Promise.all([k.state, k.leases, k.exp].map((key) => r.dumpBuffer(key))),
    );
    for (let i = 0; i < 3; i++) id(await s.acquire({ tokens: 1, model: 'm' }));
    // The promoted replica only had the first two admissions.
    await server.run(async (r) => {
      for (const [i, key] of [k.state, k.leases, k.exp].entries())
        await r.restore(key, 0, dumps[i]!, 'REPLACE');
    });
    assert.equal((await s.acquire({ tokens: 1, model: 'm' })).kind, 'wait');
    assert.equal((await s.snapshot())[0]!.inFlight, 5, 'the 2 Redis kept + the 3 it lost');
  } finally {
    await s.close();
  }
});

test('outage: killed server → StoreUnavailableError at once; restarted empty → restored, leases intact', async () => {
  const s = await open({ m: L({ maxConcurrent: 2 }) });
  try {
    const x = id(await s.acquire({ tokens: 1, model: 'm' }));
    await server.kill();
    await until(() => !s.health().up, 2000, 'store down');
    // Fails fast: refused before any command goes out (no wait for a timeout).
    assert.ok(await rejectsAtOnce(s.acquire({ tokens: 1, model: 'm' })), 'acquire refused at once');
    assert.ok(await rejectsAtOnce(s.heartbeat(x)), 'heartbeat refused at once');
    assert.ok(await rejectsAtOnce(s.snapshot()), 'snapshot refused at once');
    await assert.rejects(s.acquire({ tokens: 1, model: 'm' }), StoreUnavailableError);
    await assert.rejects(s.heartbeat(x), StoreUnavailableError);
    await assert.rejects(s.snapshot(), StoreUnavailableError);
    assert.equal(s.health().outages, 1);
    await server.restart();
    await until(() => s.health().up, 5000, 'store up');
    // The probe's recovery ran without any request: the state is there.
    await until(
      () => server.run(async (r) => (await r.hget(s.keys.state, 'json')) !== null),
      2000,
      're-seeded state',
    );
    assert.equal((await s.heartbeat(x)).id, x);
    await sleep(GRACE + 20);
    id(await s.acquire({ tokens: 1, model: 'm' }));
    assert.equal((await s.acquire({ tokens: 1, model: 'm' })).kind, 'wait', '2 of 2: the held lease counts');
  } finally {
    await s.close();
  }
});

test('hung server (SIGSTOP): a command gives up after commandTimeoutMs; a completion cut off is finished after', async () => {
  const s = await open({ m: L() });
  try {
    const x = id(await s.acquire({ tokens: 1, model: 'm' }));
    server.pause();
    try {
      const t0 = Date.now();
      await assert.rejects(s.complete(x), StoreUnavailableError);
      // It waited for the command timeout (a lower bound cannot flake on a slow machine); that it
      // gave up at all is the rejection above.
      const took = Date.now() - t0;
      assert.ok(took >= 250, `gave up after ${took} ms`);
      assert.ok(await rejectsAtOnce(s.acquire({ tokens: 1, model: 'm' })), 'then refuses at once');
      await assert.rejects(s.acquire({ tokens: 1, model: 'm' }), StoreUnavailableError);
    } finally {
      server.resume();
    }
    await until(() => s.health().up, 3000, 'store up');
    await until(async () => (await s.snapshot())[0]!.inFlight === 0, 3000, 'the cut-off completion');
    await assert.rejects(s.complete(x), LeaseNotFoundError);
  } finally {
    await s.close();
  }
});
