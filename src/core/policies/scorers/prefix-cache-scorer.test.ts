import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, scoresOf } from '../../testing.js';
import { blockHashes } from './prefix-cache-scorer.js';

const system = 'You are a careful assistant. '.repeat(8); // 232 chars
const bs = [backendView('a', 0), backendView('b', 1)];

test('blockHashes chain: a shared prefix gives equal leading hashes, then they differ', () => {
  const x = blockHashes(system + 'question one?'.repeat(10), 64, 256);
  const y = blockHashes(system + 'another thing'.repeat(10), 64, 256);
  assert.deepEqual(x.slice(0, 3), y.slice(0, 3));
  assert.notEqual(x[4], y[4]);
  assert.equal(blockHashes('short', 64, 256).length, 0);
  assert.equal(blockHashes('z'.repeat(64 * 10), 64, 4).length, 4);
});

test('prefix-cache-scorer scores the share of leading blocks a backend was sent', () => {
  const s = makePlugin('scorer', 'prefix-cache-scorer', { hashBlockSize: 64 });
  const first = requestInfo('1', system + 'first question, with some padding text'.repeat(3));
  assert.deepEqual(scoresOf(s, first, bs), [0, 0]);
  s.onDispatch!(first, bs[1]!, 0);
  const again = requestInfo('2', system + 'second question, different entirely!!'.repeat(3));
  const got = scoresOf(s, again, bs);
  assert.equal(got[0], 0);
  // 3 of the prompt's blocks are the shared system prompt.
  assert.ok(got[1]! > 0.4 && got[1]! < 1, `b scored ${got[1]}`);
  const same = requestInfo('3', first.promptText);
  assert.deepEqual(scoresOf(s, same, bs), [0, 1]);
});

test('prefix-cache-scorer is bounded per backend and forgets removed backends', () => {
  const s = makePlugin('scorer', 'prefix-cache-scorer', { hashBlockSize: 8, lruCapacityPerServer: 4 });
  const long = requestInfo('1', 'abcdefgh'.repeat(3) + '12345678' + 'zzzzzzzz' + 'yyyyyyyy');
  s.onDispatch!(long, bs[0]!, 0);
  assert.equal(s.describe!('a').prefixBlocks, 4);
  // The oldest (leading) blocks were evicted: the prefix no longer matches from the start.
  assert.deepEqual(scoresOf(s, requestInfo('2', long.promptText), bs), [0, 0]);
  s.onBackendRemoved!('a');
  assert.equal(s.describe!('a').prefixBlocks, 0);
});
