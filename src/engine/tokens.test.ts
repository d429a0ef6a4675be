import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRng } from '../core/rng.js';
import {
  contextBlockHashes,
  extendBlockHashes,
  flattenMessages,
  outputText,
  promptBlockHashes,
} from './tokens.js';

const randomText = (rng: () => number, chars: number): string => {
  let s = '';
  for (let i = 0; i < chars; i++) s += String.fromCharCode(32 + Math.floor(rng() * 90));
  return s;
};

test('extending a chain from a prefix of the text gives the chain of the whole text', () => {
  const rng = createRng(7);
  for (let trial = 0; trial < 200; trial++) {
    const blockSize = 1 + Math.floor(rng() * 20);
    const whole = randomText(rng, Math.floor(rng() * 600));
    const cut = Math.floor(rng() * (whole.length + 1));
    const head = promptBlockHashes(whole.slice(0, cut), blockSize);
    assert.deepEqual(extendBlockHashes(head, whole, blockSize), promptBlockHashes(whole, blockSize));
  }
  // A prefix chain longer than the text has blocks: only the text's own blocks come back.
  const long = promptBlockHashes('x'.repeat(400), 4);
  assert.deepEqual(extendBlockHashes(long, 'x'.repeat(40), 4), promptBlockHashes('x'.repeat(40), 4));
});

test("a prompt's context chain is the start of the chain of the follow-up that resends its answer", () => {
  const rng = createRng(11);
  const system = randomText(rng, 410);
  const user = randomText(rng, 97);
  const answer = outputText(rng, 75);
  const prompt = flattenMessages([
    { role: 'system', content: system },
    { role: 'user', content: user },
  ]);
  const hashes = promptBlockHashes(prompt, 16);
  const context = contextBlockHashes(prompt, hashes, answer, 16);
  const followUp = flattenMessages([
    { role: 'system', content: system },
    { role: 'user', content: user },
    { role: 'assistant', content: answer },
    { role: 'user', content: 'and then?' },
  ]);
  const next = promptBlockHashes(followUp, 16);
  assert.ok(context.length > hashes.length, 'the answer adds full blocks');
  assert.deepEqual(context.slice(0, hashes.length), hashes, 'the prompt blocks are the same');
  assert.deepEqual(next.slice(0, context.length), context, 'the follow-up starts with every context block');
  // A different answer shares the prompt's blocks only.
  const other = contextBlockHashes(prompt, hashes, outputText(rng, 75), 16);
  let shared = 0;
  while (shared < other.length && other[shared] === next[shared]) shared++;
  assert.equal(shared, hashes.length);
});
