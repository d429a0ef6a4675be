import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { QuotaBook } from './book.js';
import { LeaseNotFoundError, QuotaInputError, UnknownModelError } from './errors.js';
import type { Lease } from './lease.js';
import type { QuotaLimits } from './limits.js';
import { WINDOW_MS } from './window.js';

const half = (): number => 0.5;

test('complete twice / unknown id → LeaseNotFoundError and no double release', () => {
  const b = new QuotaBook({
    m: { weight: 1, maxConcurrent: 2, tokensPerMinute: 1e6, requestsPerMinute: 1e6 },
  });
  assert.equal(b.acquire({ tokens: 5, model: 'm' }, 'a', 0, half).kind, 'admitted');
  assert.equal(b.acquire({ tokens: 5, model: 'm' }, 'b', 0, half).kind, 'admitted');
  b.complete('a', 10);
  assert.throws(() => b.complete('a', 11), LeaseNotFoundError);
  assert.throws(() => b.complete('nope', 11), LeaseNotFoundError);
  assert.equal(b.snapshot(12)[0]!.inFlight, 1, 'b is still counted');
  assert.throws(
    () => b.acquire({ tokens: 5, model: 'm' }, 'b', 0, half),
    QuotaInputError,
    'id reuse refused',
  );
});

test('heartbeat keeps a lease past its TTL; without it the reclaimer takes it and frees the slot', () => {
  const b = new QuotaBook(
    { m: { weight: 1, maxConcurrent: 1, tokensPerMinute: 1000, requestsPerMinute: 100 } },
    { leaseTtlMs: 1000 },
  );
  b.acquire({ tokens: 400, model: 'm' }, 'a', 0, half);
  b.heartbeat('a', 900);
  assert.deepEqual(b.reclaimExpired(1500), []);
  assert.equal(b.acquire({ tokens: 400, model: 'm' }, 'x', 1500, half).kind, 'wait');
  assert.equal(b.reclaimExpired(1900).length, 1);
  const s = b.snapshot(1900)[0]!;
  assert.deepEqual([s.inFlight, s.windowTokens, s.windowRequests], [0, 0, 1]);
  assert.throws(() => b.complete('a', 2000), LeaseNotFoundError, 'a reclaimed lease cannot be completed');
  assert.throws(() => b.heartbeat('a', 2000), LeaseNotFoundError);
  assert.equal(b.acquire({ tokens: 400, model: 'm' }, 'y', 2000, half).kind, 'admitted');
});

test('limits change at run time without losing in-flight accounting', () => {
  const b = new QuotaBook({
    m: { weight: 1, maxConcurrent: 3, tokensPerMinute: 1e6, requestsPerMinute: 1e6 },
  });
  for (const id of ['a', 'b', 'c']) b.acquire({ tokens: 1, model: 'm' }, id, 0, half);
  b.setLimits('m', { maxConcurrent: 1 });
  assert.equal(b.snapshot(0)[0]!.inFlight, 3);
  b.complete('a', 1);
  b.complete('b', 1);
  assert.equal(b.acquire({ tokens: 1, model: 'm' }, 'd', 1, half).kind, 'wait', '1 in flight, cap 1');
  b.complete('c', 2);
  assert.equal(b.acquire({ tokens: 1, model: 'm' }, 'e', 2, half).kind, 'admitted');
  assert.throws(() => b.setLimits('m', { maxConcurrent: -1 }), QuotaInputError);
  assert.throws(() => b.setLimits('zz', { weight: 2 }), UnknownModelError);
  assert.equal(b.snapshot(2)[0]!.limits.maxConcurrent, 1, 'a rejected patch changed nothing');
  b.configure({ n: { weight: 1, maxConcurrent: 1, tokensPerMinute: 10, requestsPerMinute: 1 } });
  assert.deepEqual(
    b.snapshot(3).map((s) => [s.model, s.retired, s.inFlight]),
    [
      ['m', true, 1],
      ['n', false, 0],
    ],
  );
  assert.throws(() => b.acquire({ tokens: 1, model: 'm' }, 'f', 3, half), UnknownModelError);
  b.complete('e', 4);
  assert.deepEqual(
    b.snapshot(4).map((s) => s.model),
    ['n'],
  );
});

test('advice reflects refusals', () => {
  const b = new QuotaBook({
    m: { weight: 1, maxConcurrent: 1, tokensPerMinute: 1e6, requestsPerMinute: 1e6 },
  });
  assert.deepEqual(b.advice(0), { backpressure_score: 0, suggested_parallelism: 1 });
  b.acquire({ tokens: 1, model: 'm' }, 'a', 0, half);
  for (let i = 0; i < 20; i++) b.acquire({ tokens: 1, model: 'm' }, `w${i}`, 1, half);
  assert.ok(b.advice(2).backpressure_score > 0.4);
});

// ---- property: whatever the interleaving, no cap is ever exceeded and counters return to 0 ----

const MODELS = ['a', 'b', 'c'] as const;
const limitsArb = fc.record({
  weight: fc.integer({ min: 1, max: 4 }),
  maxConcurrent: fc.integer({ min: 0, max: 5 }),
  tokensPerMinute: fc.integer({ min: 50, max: 3000 }),
  requestsPerMinute: fc.integer({ min: 1, max: 30 }),
});
type Op =
  | { op: 'acquire'; tokens: number; model: number | null }
  | { op: 'complete'; pick: number }
  | { op: 'heartbeat'; pick: number }
  | { op: 'completeUnknown' }
  | { op: 'advance'; ms: number }
  | { op: 'reclaim' }
  | { op: 'patch'; model: number; limits: Partial<QuotaLimits> };
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.constant('acquire' as const),
      tokens: fc.integer({ min: 1, max: 1200 }),
      model: fc.option(fc.integer({ min: 0, max: 2 })),
    }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('complete' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('heartbeat' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('completeUnknown' as const) }) },
  {
    weight: 3,
    arbitrary: fc.record({ op: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 20_000 }) }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('reclaim' as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('patch' as const),
      model: fc.integer({ min: 0, max: 2 }),
      limits: limitsArb.map((l) => ({ maxConcurrent: l.maxConcurrent, tokensPerMinute: l.tokensPerMinute })),
    }),
  },
);

test('property: admitted never exceeds concurrency, tokens/min or requests/min; counters return to 0', () => {
  fc.assert(
    fc.property(
      fc.tuple(limitsArb, limitsArb, limitsArb),
      fc.array(opArb, { maxLength: 150 }),
      fc.double({ min: 0, max: 1, noNaN: true }),
      (ls, ops, r) => {
        const book = new QuotaBook({ a: ls[0], b: ls[1], c: ls[2] }, { tickMs: 250, leaseTtlMs: 15_000 });
        let now = 0;
        let seq = 0;
        const open: Lease[] = [];
        // Independent log: (time, model, tokens, reclaimedAt)
        const log: { id: string; at: number; model: string; tokens: number; reclaimedAt: number }[] = [];
        for (const o of ops) {
          if (o.op === 'acquire') {
            const model = o.model === null ? undefined : MODELS[o.model];
            const before = book.snapshot(now);
            let res;
            try {
              res = book.acquire(
                { tokens: o.tokens, ...(model ? { model } : {}) },
                `l${seq++}`,
                now,
                () => r,
              );
            } catch {
              assert.deepEqual(book.snapshot(now), before, 'a throw changes nothing');
              continue;
            }
            if (res.kind === 'wait') {
              assert.ok(Number.isInteger(res.waitForMs) && res.waitForMs >= 50);
              continue;
            }
            const l = res.lease;
            open.push(l);
            log.push({ id: l.id, at: now, model: l.model, tokens: l.tokens, reclaimedAt: Infinity });
            const s = book.snapshot(now).find((x) => x.model === l.model)!;
            assert.ok(s.inFlight <= s.limits.maxConcurrent, 'concurrency');
            // every 60 s window ending now
            const inWin = log.filter((x) => x.model === l.model && x.at > now - WINDOW_MS);
            const tokens = inWin.filter((x) => x.reclaimedAt > now).reduce((a, x) => a + x.tokens, 0);
            assert.ok(tokens <= s.limits.tokensPerMinute, `tokens ${tokens} > ${s.limits.tokensPerMinute}`);
            assert.ok(inWin.length <= s.limits.requestsPerMinute, 'requests');
          } else if (o.op === 'complete' && open.length > 0) {
            const l = open.splice(o.pick % open.length, 1)[0]!;
            try {
              book.complete(l.id, now);
            } catch (e) {
              assert.ok(e instanceof LeaseNotFoundError);
              assert.ok(
                log.some((x) => x.reclaimedAt <= now),
                'only a reclaimed lease may be gone',
              );
            }
          } else if (o.op === 'heartbeat' && open.length > 0) {
            const l = open[o.pick % open.length]!;
            if (book.lease(l.id)) book.heartbeat(l.id, now);
          } else if (o.op === 'completeUnknown') {
            const before = JSON.stringify(book.snapshot(now));
            assert.throws(() => book.complete('nope', now), LeaseNotFoundError);
            assert.equal(JSON.stringify(book.snapshot(now)), before);
          } else if (o.op === 'advance') {
            now += o.ms;
          } else if (o.op === 'reclaim') {
            for (const l of book.reclaimExpired(now)) {
              log.find((x) => x.id === l.id)!.reclaimedAt = now;
            }
          } else if (o.op === 'patch') {
            book.setLimits(MODELS[o.model]!, o.limits);
          }
          const adv = book.advice(now);
          assert.ok(Number.isFinite(adv.backpressure_score) && Number.isInteger(adv.suggested_parallelism));
        }
        for (const l of open) {
          if (book.lease(l.id)) book.complete(l.id, now);
        }
        now += WINDOW_MS + 1000;
        assert.equal(book.leaseCount, 0);
        for (const s of book.snapshot(now)) {
          assert.deepEqual([s.inFlight, s.windowTokens, s.windowRequests], [0, 0, 0], s.model);
        }
      },
    ),
    { numRuns: 300 },
  );
});
