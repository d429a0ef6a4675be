/**
 * Runs against the real Redis at 127.0.0.1:6379 (REDIS_URL overrides). No Redis → the tests fail
 * with the connection error: they are never skipped. Each run uses its own key prefix and deletes
 * its keys afterwards.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { LeaseNotFoundError, type QuotaLimits } from '../core/quota/index.js';
import { quotaStoreSuite } from './quota-store.testing.js';
import { RedisQuotaStore, decodeState, encodeState } from './redis-quota-store.js';
import { createQuotaState, tryAdmit, resolveOptions } from '../core/quota/index.js';

const URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';
const RUN = `llmlb:test:${randomUUID()}:`;
let n = 0;

after(async () => {
  const r = new Redis(URL, { lazyConnect: true });
  await r.connect();
  const keys = await r.keys(`${RUN}*`);
  if (keys.length > 0) await r.del(...keys);
  await r.quit();
});

quotaStoreSuite('redis', (limits, quota, env) =>
  RedisQuotaStore.connect(URL, limits, { prefix: `${RUN}${++n}:{q}:`, quota, env }),
);

const L: QuotaLimits = { weight: 1, maxConcurrent: 5, tokensPerMinute: 10_000, requestsPerMinute: 60 };

test('redis: replicas on one prefix share caps and leases (no over-admission, no double release)', async () => {
  const prefix = `${RUN}shared:{q}:`;
  const replicas = await Promise.all([0, 1, 2].map(() => RedisQuotaStore.connect(URL, { m: L }, { prefix })));
  try {
    const rs = await Promise.all(
      Array.from({ length: 150 }, (_, i) => replicas[i % 3]!.acquire({ tokens: 100, model: 'm' })),
    );
    const ids = rs.flatMap((r) => (r.kind === 'admitted' ? [r.lease.id] : []));
    assert.equal(ids.length, 5);
    // A lease taken on one replica completes on another, once.
    await replicas[1]!.complete(ids[0]!);
    await assert.rejects(replicas[2]!.complete(ids[0]!), LeaseNotFoundError);
    const results = await Promise.allSettled(
      ids.slice(1).flatMap((id) => [replicas[0]!.complete(id), replicas[2]!.complete(id)]),
    );
    assert.equal(
      results.filter((r) => r.status === 'fulfilled').length,
      4,
      'each lease released exactly once',
    );
    assert.equal((await replicas[0]!.snapshot())[0]!.inFlight, 0);
    // A limit changed through one replica binds the others.
    await replicas[0]!.setLimits('m', { maxConcurrent: 1 });
    const again = await Promise.all([
      replicas[1]!.acquire({ tokens: 1, model: 'm' }),
      replicas[2]!.acquire({ tokens: 1, model: 'm' }),
    ]);
    assert.equal(again.filter((r) => r.kind === 'admitted').length, 1);
  } finally {
    await Promise.all(replicas.map((r) => r.close()));
  }
});

test('redis: an unreachable server is an error, not a hang', async () => {
  await assert.rejects(RedisQuotaStore.connect('redis://127.0.0.1:1/0', { m: L }), /cannot reach Redis/);
});

test('redis: the compact state encoding round-trips', () => {
  const s = createQuotaState({ m: L, n: L });
  const o = resolveOptions();
  for (let i = 0; i < 20; i++)
    tryAdmit(s, { tokens: 10 + i, model: i % 2 ? 'm' : 'n' }, `l${i}`, 1000 + i * 70, o, () => 0.5);
  assert.deepEqual(decodeState(encodeState(s)), s);
  assert.ok(encodeState(s).length < JSON.stringify(s).length * 0.7);
});
