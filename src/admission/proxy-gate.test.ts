import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_OUTPUT_TOKENS, estimateRequestTokens } from './proxy-gate.js';

test('a proxied request is sized as prompt chars / 4 plus its output cap (default when absent)', () => {
  assert.equal(estimateRequestTokens('x'.repeat(400), 50), 150);
  assert.equal(estimateRequestTokens('', undefined), DEFAULT_OUTPUT_TOKENS);
  assert.equal(estimateRequestTokens('', 0), 1, 'never 0: the quota core needs ≥ 1');
});
