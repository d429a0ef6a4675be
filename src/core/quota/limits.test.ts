import { test } from 'node:test';
import assert from 'node:assert/strict';
import { QuotaInputError } from './errors.js';
import { mergeLimits, validateLimits } from './limits.js';

const ok = { weight: 1.5, maxConcurrent: 0, tokensPerMinute: 1, requestsPerMinute: 1 };

test('valid limits pass through; each bad field is named', () => {
  assert.deepEqual(validateLimits(ok), ok);
  const bad: [Partial<typeof ok>, RegExp][] = [
    [{ weight: 0 }, /weight/],
    [{ weight: Infinity }, /weight/],
    [{ maxConcurrent: -1 }, /maxConcurrent/],
    [{ maxConcurrent: 1.5 }, /maxConcurrent/],
    [{ tokensPerMinute: 0 }, /tokensPerMinute/],
    [{ requestsPerMinute: Number.NaN }, /requestsPerMinute/],
  ];
  for (const [patch, msg] of bad) {
    assert.throws(
      () => validateLimits({ ...ok, ...patch }, 'quotas.models.m'),
      (e: unknown) => {
        return (
          e instanceof QuotaInputError && msg.test(e.message) && e.message.startsWith('quotas.models.m.')
        );
      },
    );
  }
});

test('merge applies only given fields and leaves the base untouched', () => {
  const base = { ...ok };
  assert.deepEqual(mergeLimits(base, { maxConcurrent: 3, weight: undefined }), { ...ok, maxConcurrent: 3 });
  assert.deepEqual(base, ok);
  assert.throws(() => mergeLimits(base, { tokensPerMinute: -5 }), QuotaInputError);
});
