import { test } from 'node:test';
import assert from 'node:assert/strict';
import { QuotaInputError, UnknownModelError } from './errors.js';
import { applyLimits, createQuotaState, liveModels, patchLimits } from './state.js';
import { capacityOf, snapshotState } from './snapshot.js';

const L = { weight: 1, maxConcurrent: 2, tokensPerMinute: 100, requestsPerMinute: 10 };

test('applyLimits validates everything before changing anything', () => {
  const s = createQuotaState({ a: L });
  const before = JSON.stringify(s);
  assert.throws(
    () => applyLimits(s, { a: { ...L, maxConcurrent: 5 }, b: { ...L, weight: -1 } }),
    QuotaInputError,
  );
  assert.equal(JSON.stringify(s), before);
});

test('reload keeps counters of kept models, adds new ones, retires busy removed ones, drops idle ones', () => {
  const s = createQuotaState({ a: L, b: L, c: L });
  s.models.a!.inFlight = 1;
  s.models.a!.deficit = 42;
  s.models.b!.inFlight = 2;
  applyLimits(s, { a: { ...L, maxConcurrent: 9 }, d: L });
  assert.deepEqual([s.models.a!.inFlight, s.models.a!.deficit, s.models.a!.limits.maxConcurrent], [1, 42, 9]);
  assert.equal(s.models.b!.retired, true);
  assert.equal(s.models.c, undefined);
  assert.deepEqual(
    liveModels(s).map(([k]) => k),
    ['a', 'd'],
  );
  assert.deepEqual(capacityOf(s), { capacity: 11, inFlight: 3 });
  applyLimits(s, { a: L, b: L, d: L });
  assert.equal(s.models.b!.retired, false, 're-adding a retired model revives it with its counters');
  assert.equal(s.models.b!.inFlight, 2);
});

test('patchLimits: unknown or retired → UnknownModelError; snapshot is sorted and prunes old slots', () => {
  const s = createQuotaState({ b: L, a: L });
  assert.throws(() => patchLimits(s, 'z', { weight: 2 }), UnknownModelError);
  assert.equal(patchLimits(s, 'a', { weight: 2 }).weight, 2);
  s.models.a!.slots.push({ start: 0, tokens: 5, requests: 1 });
  assert.deepEqual(
    snapshotState(s, 1000, 100).map((x) => [x.model, x.windowTokens]),
    [
      ['a', 5],
      ['b', 0],
    ],
  );
  assert.equal(snapshotState(s, 60_100, 100)[0]!.windowTokens, 0);
});

test('prototype-named keys are ordinary keys: never Object.prototype, never its setter', () => {
  const s = createQuotaState({ constructor: L });
  for (const k of ['__proto__', 'toString', 'valueOf', 'hasOwnProperty'])
    assert.throws(() => patchLimits(s, k, { maxConcurrent: 1 }), UnknownModelError, k);
  assert.equal(patchLimits(s, 'constructor', { maxConcurrent: 7 }).maxConcurrent, 7);
  const limits = Object.create(null) as Record<string, typeof L>;
  limits['constructor'] = L;
  limits['__proto__'] = L; // an own key on a null-prototype object
  applyLimits(s, limits);
  assert.deepEqual(
    liveModels(s)
      .map(([k]) => k)
      .sort(),
    ['__proto__', 'constructor'],
  );
  assert.equal(Object.getPrototypeOf(s.models), null);
  assert.equal(({} as Record<string, unknown>).limits, undefined, 'Object.prototype untouched');
  // A state decoded from JSON (the Redis store) has a prototype: reads still find only own keys.
  const decoded = JSON.parse(JSON.stringify(s)) as typeof s;
  assert.throws(() => patchLimits(decoded, 'toString', { weight: 2 }), UnknownModelError);
  assert.equal(patchLimits(decoded, '__proto__', { weight: 2 }).weight, 2);
  assert.equal(Object.getPrototypeOf(decoded.models), Object.prototype);
});
