import assert from 'node:assert/strict';
import { test } from 'node:test';
import { classTable, hasTaskClasses, speedClassifier } from './class-table.js';
import type { RequestRecord, RunResult } from './simulator.js';

const fast = { speed: 1, baseStepS: 0.01, perSeqS: 0, perTokenS: 0, prefillPerTokenS: 1e-4 };
const slow = { ...fast, speed: 0.1 };
const classify = speedClassifier(
  new Map([
    ['fast', fast],
    ['slow', slow],
  ]),
);

test('a request is classed by the speed of the backend it ran on', () => {
  // 2,000 prompt tokens: 0.21 s of prefill on fast (light), 2.1 s on slow (heavy); 200 answer
  // tokens: 2 s of decode on fast (light), 20 s on slow (heavy).
  const rec = { promptTokens: 2000, outputTokens: 200 };
  assert.equal(classify({ ...rec, backend: 'fast' }), 'LL');
  assert.equal(classify({ ...rec, backend: 'slow' }), 'HH');
  assert.equal(classify({ promptTokens: 6000, outputTokens: 10, backend: 'fast' }), 'HL');
  assert.equal(classify({ promptTokens: 10, outputTokens: 600, backend: 'fast' }), 'LH');
  assert.equal(classify({ ...rec, backend: undefined }), undefined);
  assert.equal(classify({ ...rec, backend: 'unknown' }), undefined);
});

test('context cost counts toward decode: each step attends to the prompt and the answer so far', () => {
  const withContext = speedClassifier(
    new Map([['b', { ...fast, baseStepS: 0.001, perTokenS: 1e-6, prefillPerTokenS: 1e-5 }]]),
  );
  // 500 steps × 1 ms = 0.5 s, plus 1e-6 × (500 × 8000 + 500·499/2) ≈ 4.1 s: 4.6 s (light); a
  // 9,000-token prompt adds 0.5 s more: heavy.
  assert.equal(withContext({ promptTokens: 8000, outputTokens: 500, backend: 'b' }), 'LL');
  assert.equal(withContext({ promptTokens: 9000, outputTokens: 500, backend: 'b' }), 'LH');
});

function rec(
  id: string,
  backend: string,
  promptTokens: number,
  outputTokens: number,
  e2e: number,
): RequestRecord {
  return {
    id,
    label: `sentiment/LL`,
    arrivalS: 0,
    dispatchS: 0,
    firstTokenS: e2e / 2,
    finishS: e2e,
    backend,
    ok: true,
    failure: undefined,
    promptTokens,
    outputTokens,
    cachedTokens: 0,
  };
}

test('the table groups by the speed class when a classifier is given, by the label otherwise', () => {
  const run = {
    policy: 'p',
    records: [rec('1', 'fast', 2000, 200, 3), rec('2', 'slow', 2000, 200, 30)],
  } as unknown as RunResult;
  assert.equal(hasTaskClasses([run]), true);
  const bySpeed = classTable([run], classify);
  assert.match(bySpeed, /\bp\s+LL\s+1\s+3\.00/);
  assert.match(bySpeed, /\bp\s+HH\s+1\s+30\.00/);
  const byLabel = classTable([run]);
  assert.match(byLabel, /\bp\s+LL\s+2\s+16\.50/);
  assert.doesNotMatch(byLabel, /HH/);
});
