import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tryAdmit } from './admit.js';
import { LeaseNotFoundError } from './errors.js';
import { LeaseTable, reclaimLease, releaseLease, type Lease } from './lease.js';
import { resolveOptions } from './options.js';
import { applyLimits, createQuotaState } from './state.js';
import { windowUsage } from './window.js';

const O = resolveOptions({ tickMs: 100, leaseTtlMs: 1000 });
const limits = { m: { weight: 1, maxConcurrent: 2, tokensPerMinute: 1000, requestsPerMinute: 100 } };

function admit(s: ReturnType<typeof createQuotaState>, id: string, now: number): Lease {
  const r = tryAdmit(s, { tokens: 300, model: 'm' }, id, now, O, () => 0.5);
  assert.equal(r.kind, 'admitted');
  return (r as { lease: Lease }).lease;
}

test('release frees the slot only; tokens stay charged; lifetime feeds the mean', () => {
  const s = createQuotaState(limits);
  const l = admit(s, 'a', 0);
  assert.equal(l.expiresAt, 1000);
  releaseLease(s, l, 400);
  const m = s.models.m!;
  assert.equal(m.inFlight, 0);
  assert.equal(windowUsage(m.slots).tokens, 300);
  assert.equal(m.meanHoldMs, 400);
});

test('reclaim frees the slot and refunds tokens and deficit; the request stays charged', () => {
  const s = createQuotaState(limits);
  const l = admit(s, 'a', 0);
  const m = s.models.m!;
  const deficitAfterAdmit = m.deficit;
  reclaimLease(s, l, O);
  assert.equal(m.inFlight, 0);
  assert.deepEqual(windowUsage(m.slots), { tokens: 0, requests: 1 });
  assert.equal(m.deficit, deficitAfterAdmit + 300);
  assert.equal(m.meanHoldMs, null, 'abandoned leases say nothing about service time');
});

test('lease table: take twice → LeaseNotFoundError; heartbeat extends; expired are taken once', () => {
  const t = new LeaseTable();
  const l: Lease = { id: 'x', model: 'm', tokens: 1, admittedAt: 0, expiresAt: 1000, tick: 0 };
  t.add(l);
  assert.equal(t.heartbeat('x', 900, 1000).expiresAt, 1900);
  assert.deepEqual(t.takeExpired(1899), []);
  assert.equal(t.takeExpired(1900).length, 1);
  assert.throws(() => t.take('x'), LeaseNotFoundError);
  assert.throws(() => t.heartbeat('x', 0, 1), LeaseNotFoundError);
  assert.equal(t.size, 0);
});

test('a model removed by reload while leases are out retires, then goes when the last completes', () => {
  const s = createQuotaState(limits);
  const a = admit(s, 'a', 0);
  const b = admit(s, 'b', 0);
  applyLimits(s, {});
  assert.equal(s.models.m!.retired, true);
  assert.equal(s.models.m!.inFlight, 2);
  releaseLease(s, a, 10);
  reclaimLease(s, b, O);
  assert.equal(s.models.m, undefined);
  releaseLease(s, a, 20); // a stale lease of a deleted model is a no-op, not a crash
});
