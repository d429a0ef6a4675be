import { test } from 'node:test';
import assert from 'node:assert/strict';
import { commonPrefixLength } from '../../src/engine/slot-cache.js';
import { pickSlot, reusableTokens } from './slots.js';

test('the common prefix of two token lists', () => {
  assert.equal(commonPrefixLength([1, 2, 3], [1, 2, 4]), 2);
  assert.equal(commonPrefixLength([1, 2], [1, 2, 3]), 2);
  assert.equal(commonPrefixLength([], [1]), 0);
  assert.equal(commonPrefixLength([5], [1]), 0);
});

test('a prompt wholly cached keeps its last token to evaluate', () => {
  assert.equal(reusableTokens([1, 2, 3, 4], [1, 2, 3]), 2);
  assert.equal(reusableTokens([1, 2, 3], [1, 2, 3]), 2);
  assert.equal(reusableTokens([1, 2, 9], [1, 2, 3, 4]), 2);
  assert.equal(reusableTokens([1], [1]), 0);
});

test('a request takes the free slot sharing the longest prefix', () => {
  const slots = [
    { busy: false, tokens: [1, 2], lastUsed: 1 },
    { busy: false, tokens: [1, 2, 3, 4], lastUsed: 2 },
    { busy: false, tokens: [7, 8, 9], lastUsed: 0 },
  ];
  assert.equal(pickSlot(slots, [1, 2, 3, 4, 5]), 1);
  // The best slot busy: the next best free one, not a wait.
  assert.equal(
    pickSlot([{ ...slots[0]!, busy: false }, { ...slots[1]!, busy: true }, slots[2]!], [1, 2, 3, 4, 5]),
    0,
  );
});

test('with no shared prefix (or a tie) the least recently used slot goes', () => {
  const slots = [
    { busy: false, tokens: [4], lastUsed: 5 },
    { busy: false, tokens: [5], lastUsed: 2 },
    { busy: false, tokens: [6], lastUsed: 3 },
  ];
  assert.equal(pickSlot(slots, [9, 9]), 1);
  assert.equal(
    pickSlot(
      [
        { busy: false, tokens: [1, 2, 7], lastUsed: 9 },
        { busy: false, tokens: [1, 2, 8], lastUsed: 4 },
      ],
      [1, 2, 3],
    ),
    1,
  );
});

test('every slot busy: none', () => {
  assert.equal(pickSlot([{ busy: true, tokens: [1], lastUsed: 0 }], [1, 2]), -1);
  assert.equal(pickSlot([], [1]), -1);
});
