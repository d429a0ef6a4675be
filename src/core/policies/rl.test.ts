import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Mlp } from '../../rl/mlp.js';
import { createRng } from '../rng.js';
import { backendView, requestInfo } from '../testing.js';
import { createPolicy } from './index.js';
import { parseRlWeights, rl, stateSize } from './rl.js';

/** A weights document whose Q is its output bias alone (all last-layer weights zero). */
function weights(backends: number, bias: number[]): Record<string, unknown> {
  const net = new Mlp([stateSize(backends, 3), 8, backends + 1], createRng(1));
  net.w[1]!.fill(0);
  net.b[1]!.set(bias);
  return { kind: 'llmlb-rl', backends, bucketEdges: [250, 1000], kvCapacityTokens: 2304, net: net.toJSON() };
}

const busy = (name: string, i: number) => backendView(name, i, { inFlight: 1 });

test('picks the backend with the highest Q among the candidates', () => {
  const p = rl({ random: Math.random, params: { weights: weights(3, [0, 0, 5, -1]) } });
  const bs = [backendView('a', 0), backendView('b', 1), backendView('c', 2)];
  assert.equal(p.pick(requestInfo('r1', 'hello'), bs, 0)?.name, 'c');
  // c filtered out (at its cap): the next best of those asked.
  assert.equal(p.pick(requestInfo('r2', 'hello'), bs.slice(0, 2), 0)?.name, 'a');
});

test('"wait" holds the request only while it fits nowhere and every candidate has work in flight', () => {
  const p = rl({ random: Math.random, params: { weights: weights(2, [0, 1, 9]) } });
  const req = requestInfo('r1', 'x'.repeat(400));
  const [a, b] = [busy('a', 0), busy('b', 1)];
  // Room in the KV of both: no waiting.
  assert.equal(p.pick(req, [a, b], 0)?.name, 'b');
  // a full (2,300 of its 2,304 tokens), b idle: waiting could hold it with nothing left to re-ask it.
  p.onDispatch!(requestInfo('big-a', 'x'.repeat(4 * 2300)), a, 0);
  assert.equal(p.pick(req, [a, backendView('b', 1)], 0)?.name, 'b');
  // Both full and busy: hold it.
  p.onDispatch!(requestInfo('big-b', 'x'.repeat(4 * 2300)), b, 0);
  assert.equal(p.pick(req, [a, b], 0), undefined);
});

test('backends past the trained slots are used only when no slotted one can be', () => {
  const p = rl({ random: Math.random, params: { weights: weights(2, [3, 0, -9]) } });
  const bs = [backendView('a', 0), backendView('b', 1), backendView('z', 2)];
  assert.equal(p.pick(requestInfo('r1'), bs, 0)?.name, 'a');
  assert.equal(p.pick(requestInfo('r2'), [bs[2]!], 0)?.name, 'z');
});

test('bad weights documents are clear errors', () => {
  const ok = weights(2, [0, 0, 0]);
  const cases: [unknown, RegExp][] = [
    [null, /not a JSON object/],
    [[1], /not a JSON object/],
    [{ ...ok, kind: 'x' }, /kind must be 'llmlb-rl'/],
    [{ ...ok, backends: 0 }, /backends must be/],
    [{ ...ok, bucketEdges: [1000, 250] }, /bucketEdges/],
    [{ ...ok, kvCapacityTokens: -1 }, /kvCapacityTokens/],
    [{ ...ok, net: { sizes: [3], layers: [] } }, /mlp weights: sizes/],
    [{ ...ok, backends: 3 }, /net input must be/],
    [{ ...ok, net: weights(3, [0, 0, 0, 0]).net, backends: 2 }, /net input must be/],
  ];
  for (const [doc, re] of cases) assert.throws(() => parseRlWeights(doc), re);
  // The last layer's width must be backends + 1.
  const wrongOut = new Mlp([stateSize(2, 3), 4, 2], createRng(2)).toJSON();
  assert.throws(() => parseRlWeights({ ...ok, net: wrongOut }), /net output must be 3/);
  const nan = JSON.parse(JSON.stringify(ok)) as { net: { layers: { b: unknown[] }[] } };
  nan.net.layers[0]!.b[0] = 'x';
  assert.throws(() => parseRlWeights(nan), /layer 0: b must be/);
  assert.throws(
    () => createPolicy({ name: 'rl', params: { weights: { ...ok, kind: 'nope' } } }, Math.random),
    /policy rl: .*kind/,
  );
  assert.throws(
    () => createPolicy({ name: 'rl', params: { file: 3 } }, Math.random),
    /policy 'rl' parameters: file/,
  );
});

test('as a built-in: createPolicy with weights given; unknown parameters rejected', () => {
  const p = createPolicy({ name: 'rl', params: { weights: weights(2, [0, 4, 0]) } }, Math.random);
  assert.equal(p.pick(requestInfo('r'), [backendView('a', 0), backendView('b', 1)], 0)?.name, 'b');
  assert.throws(
    () => createPolicy({ name: 'rl', params: { weights: weights(2, [0, 0, 0]), nope: 1 } }, Math.random),
    /nope/,
  );
});
