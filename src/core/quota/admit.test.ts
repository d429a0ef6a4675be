import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tryAdmit, type AdmitResult } from './admit.js';
import { LeaseNotFoundError, QuotaInputError, TooLargeError, UnknownModelError } from './errors.js';
import type { QuotaLimits } from './limits.js';
import { resolveOptions } from './options.js';
import { createQuotaState } from './state.js';

const O = resolveOptions({ tickMs: 100 });
const half = (): number => 0.5;
const L = (over: Partial<QuotaLimits> = {}): QuotaLimits => ({
  weight: 1,
  maxConcurrent: 100,
  tokensPerMinute: 100_000,
  requestsPerMinute: 1000,
  ...over,
});
let n = 0;
const id = (): string => `l${++n}`;
function waitOf(r: AdmitResult): Extract<AdmitResult, { kind: 'wait' }> {
  assert.equal(r.kind, 'wait');
  return r as Extract<AdmitResult, { kind: 'wait' }>;
}

test('concurrency cap: admits up to maxConcurrent, then waits with reason concurrency', () => {
  const s = createQuotaState({ m: L({ maxConcurrent: 2 }) });
  assert.equal(tryAdmit(s, { tokens: 10, model: 'm' }, id(), 0, O, half).kind, 'admitted');
  assert.equal(tryAdmit(s, { tokens: 10, model: 'm' }, id(), 0, O, half).kind, 'admitted');
  const w = waitOf(tryAdmit(s, { tokens: 10, model: 'm' }, id(), 0, O, half));
  assert.equal(w.reason, 'concurrency');
  assert.ok(w.waitForMs >= 50);
  assert.equal(s.models.m!.inFlight, 2);
});

test('tokens per minute: refused once the minute is spent; the hint is when the first tick leaves', () => {
  const s = createQuotaState({ m: L({ tokensPerMinute: 1000 }) });
  assert.equal(tryAdmit(s, { tokens: 600, model: 'm' }, id(), 0, O, half).kind, 'admitted');
  assert.equal(tryAdmit(s, { tokens: 400, model: 'm' }, id(), 1000, O, half).kind, 'admitted');
  const w = waitOf(tryAdmit(s, { tokens: 300, model: 'm' }, id(), 2000, O, half));
  assert.equal(w.reason, 'tokens');
  assert.equal(w.rawWaitMs, 60_100 - 2000);
  // random 0.5 = no jitter: wake exactly at the tick boundary when capacity returns
  assert.equal(w.waitForMs, 58_100);
  assert.equal(tryAdmit(s, { tokens: 300, model: 'm' }, id(), 60_099, O, half).kind, 'wait');
  assert.equal(tryAdmit(s, { tokens: 300, model: 'm' }, id(), 60_100, O, half).kind, 'admitted');
});

test('requests per minute is its own limit', () => {
  const s = createQuotaState({ m: L({ requestsPerMinute: 2 }) });
  tryAdmit(s, { tokens: 1, model: 'm' }, id(), 0, O, half);
  tryAdmit(s, { tokens: 1, model: 'm' }, id(), 0, O, half);
  assert.equal(waitOf(tryAdmit(s, { tokens: 1, model: 'm' }, id(), 0, O, half)).reason, 'requests');
});

test('bad input, unknown model and impossible sizes throw before changing anything', () => {
  const s = createQuotaState({ m: L({ tokensPerMinute: 1000 }) });
  const before = JSON.stringify(s);
  for (const t of [0, -1, 1.5, Number.NaN, Infinity]) {
    assert.throws(() => tryAdmit(s, { tokens: t, model: 'm' }, id(), 0, O, half), QuotaInputError);
  }
  assert.throws(() => tryAdmit(s, { tokens: 1, model: 'zz' }, id(), 0, O, half), UnknownModelError);
  assert.throws(() => tryAdmit(s, { tokens: 1001, model: 'm' }, id(), 0, O, half), TooLargeError);
  assert.throws(
    () => tryAdmit(createQuotaState(), { tokens: 1 }, id(), 0, O, half),
    /no model quotas are configured/,
  );
  assert.equal(JSON.stringify(s), before);
  assert.ok(!(new LeaseNotFoundError('x') instanceof QuotaInputError));
});

test('model omitted: WDRR shares tokens by weight among models with capacity', () => {
  const s = createQuotaState({
    a: L({ weight: 1, maxConcurrent: 1000 }),
    b: L({ weight: 2, maxConcurrent: 1000 }),
  });
  const got = { a: 0, b: 0 };
  for (let i = 0; i < 300; i++) {
    const r = tryAdmit(s, { tokens: 100 }, id(), i, O, half);
    assert.equal(r.kind, 'admitted');
    if (r.kind === 'admitted') got[r.lease.model as 'a' | 'b'] += 1;
  }
  assert.ok(Math.abs(got.b / 300 - 2 / 3) < 0.02, JSON.stringify(got));
});

test('model omitted: a full model is skipped, and the wait names the soonest model', () => {
  const s = createQuotaState({ a: L({ maxConcurrent: 1 }), b: L({ tokensPerMinute: 500 }) });
  const first = tryAdmit(s, { tokens: 400 }, id(), 0, O, half);
  const second = tryAdmit(s, { tokens: 400 }, id(), 0, O, half);
  assert.equal(first.kind, 'admitted');
  assert.equal(second.kind, 'admitted');
  const models = [first, second].map((r) => (r.kind === 'admitted' ? r.lease.model : '')).sort();
  assert.deepEqual(models, ['a', 'b']);
  const w = waitOf(tryAdmit(s, { tokens: 400 }, id(), 10, O, half));
  assert.equal(w.model, 'a', 'a frees a slot sooner than b frees tokens');
  assert.equal(w.reason, 'concurrency');
});

function starve(ageBonusMs: number): { bigAdmittedAt: number; hold: unknown } {
  const o = resolveOptions({ tickMs: 100, ageBonusMs });
  const s = createQuotaState({ m: L({ tokensPerMinute: 1200 }) });
  // Small requests (100 tokens) every 500 ms would take every token that frees up; the large
  // one (1000) starts retrying once the minute is full.
  let bigAdmittedAt = -1;
  for (let now = 0; now < 200_000 && bigAdmittedAt < 0; now += 500) {
    tryAdmit(s, { tokens: 100, model: 'm' }, id(), now, o, half);
    if (now < 6000) continue;
    const big = tryAdmit(s, { tokens: 1000, model: 'm' }, id(), now + 1, o, half);
    if (big.kind === 'admitted') bigAdmittedAt = now;
  }
  return { bigAdmittedAt, hold: s.models.m!.hold };
}

test('age bonus: a large request refused for tokens is not starved by a stream of small ones', () => {
  const withBonus = starve(2000);
  assert.ok(
    withBonus.bigAdmittedAt > 6000 && withBonus.bigAdmittedAt < 80_000,
    String(withBonus.bigAdmittedAt),
  );
  assert.equal(withBonus.hold, null, 'hold ended with the admission');
  // Control: with the bonus effectively off, the same stream starves it for the whole run.
  assert.equal(starve(1e9).bigAdmittedAt, -1);
});

test('without the holder retrying, the reservation lapses and small requests proceed', () => {
  const s = createQuotaState({ m: L({ tokensPerMinute: 1000 }) });
  tryAdmit(s, { tokens: 900, model: 'm' }, id(), 0, O, half);
  const big = waitOf(tryAdmit(s, { tokens: 500, model: 'm' }, id(), 100, O, half));
  const expires = s.models.m!.hold!.expiresAt;
  assert.equal(expires, 100 + big.waitForMs + O.holdGraceMs);
  // aged hold blocks a small one…
  assert.equal(tryAdmit(s, { tokens: 50, model: 'm' }, id(), 3000, O, half).kind, 'wait');
  // …until the holder is gone
  assert.equal(tryAdmit(s, { tokens: 50, model: 'm' }, id(), expires, O, half).kind, 'admitted');
});

test('a hold made larger than the target by a lowered limit reserves nothing, and hints stay finite', () => {
  const s = createQuotaState({ m: L({ tokensPerMinute: 1000 }) });
  tryAdmit(s, { tokens: 900, model: 'm' }, id(), 0, O, half);
  waitOf(tryAdmit(s, { tokens: 800, model: 'm' }, id(), 100, O, half)); // opens a hold of 800
  s.models.m!.limits = { ...s.models.m!.limits, tokensPerMinute: 500 };
  const w = waitOf(tryAdmit(s, { tokens: 50, model: 'm' }, id(), 3000, O, half));
  assert.ok(Number.isInteger(w.waitForMs) && w.waitForMs >= 50);
  assert.equal(w.rawWaitMs, 60_100 - 3000, 'waits for the 900 to leave, not for the impossible hold');
});

test('a pinned model named like an Object.prototype member is unknown unless configured', () => {
  const s = createQuotaState({ m: L() });
  for (const model of ['constructor', 'toString', '__proto__', 'valueOf'])
    assert.throws(() => tryAdmit(s, { tokens: 1, model }, id(), 0, O, half), UnknownModelError, model);
});
