import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MlpNet } from '../../estimators/mlp.js';
import { createRng } from '../../rng.js';
import { backendView, requestInfo, chosen } from '../../testing.js';
import { HOLD } from '../../types.js';
import type { BackendView, Policy } from '../../types.js';
import { Scheduler } from '../../scheduler.js';
import { createPolicy } from '../index.js';
import {
  featureClip,
  parseRlWeights,
  rl,
  rlPolicyFrom,
  sharedGlobalSize,
  sharedRowSize,
  stateSize,
  type RlWeights,
} from './rl.js';

/** A flat-layout weights document whose Q is its output bias alone (all last-layer weights zero). */
function weights(backends: number, bias: number[]): Record<string, unknown> {
  const net = new MlpNet([stateSize(backends, 3), 8, backends + 1]);
  net.b[1]!.set(bias);
  return { kind: 'llmlb-rl', backends, bucketEdges: [250, 1000], kvCapacityTokens: 2304, net: net.toJSON() };
}

const F = sharedRowSize(3);
const G = sharedGlobalSize(3);
/**
 * A shared-head document whose Q is linear in the option row: Q = 10 + Σ coef[i] · row[i] (one
 * hidden unit kept positive by its bias, so ReLU passes it).
 */
function shared(coef: Record<number, number>, kvCapacityTokens = 2304): Record<string, unknown> {
  const net = new MlpNet([F, 1, 1]);
  for (const [i, c] of Object.entries(coef)) net.w[0]![Number(i)] = c;
  net.b[0]![0] = 10;
  net.w[1]![0] = 1;
  return {
    kind: 'llmlb-rl',
    arch: 'shared-head',
    backends: 4,
    bucketEdges: [250, 1000],
    kvCapacityTokens,
    net: net.toJSON(),
  };
}
const FREE = G + 1;
const WAIT = G;
const FLIGHTS = G + 5;

const busy = (name: string, i: number) => backendView(name, i, { inFlight: 1 });

test('picks the backend with the highest Q among the candidates', () => {
  const p = rl({ random: Math.random, params: { weights: weights(3, [0, 0, 5, -1]) } });
  const bs = [backendView('a', 0), backendView('b', 1), backendView('c', 2)];
  assert.equal(chosen(p.pick(requestInfo('r1', 'hello'), bs, 0))?.name, 'c');
  // c filtered out (at its cap): the next best of those asked.
  assert.equal(chosen(p.pick(requestInfo('r2', 'hello'), bs.slice(0, 2), 0))?.name, 'a');
});

test('"wait" holds the request only while it fits nowhere and every candidate has work in flight', () => {
  const p = rl({ random: Math.random, params: { weights: weights(2, [0, 1, 9]) } });
  const req = requestInfo('r1', 'x'.repeat(400));
  const [a, b] = [busy('a', 0), busy('b', 1)];
  // Room in the KV of both: no waiting.
  assert.equal(chosen(p.pick(req, [a, b], 0))?.name, 'b');
  // a full (2,300 of its 2,304 tokens), b idle: waiting could hold it with nothing left to re-ask it.
  p.onDispatch!(requestInfo('big-a', 'x'.repeat(4 * 2300)), a, 0);
  assert.equal(chosen(p.pick(req, [a, backendView('b', 1)], 0))?.name, 'b');
  // Both full and busy: hold it.
  p.onDispatch!(requestInfo('big-b', 'x'.repeat(4 * 2300)), b, 0);
  assert.equal(p.pick(req, [a, b], 0), HOLD.untilChange); // redecide on-change
});

test('backends past the trained slots are used only when no slotted one can be', () => {
  const p = rl({ random: Math.random, params: { weights: weights(2, [3, 0, -9]) } });
  const bs = [backendView('a', 0), backendView('b', 1), backendView('z', 2)];
  assert.equal(chosen(p.pick(requestInfo('r1'), bs, 0))?.name, 'a');
  assert.equal(chosen(p.pick(requestInfo('r2'), [bs[2]!], 0))?.name, 'z');
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
  const wrongOut = new MlpNet([stateSize(2, 3), 4, 2]).toJSON();
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
  assert.equal(chosen(p.pick(requestInfo('r'), [backendView('a', 0), backendView('b', 1)], 0))?.name, 'b');
  assert.throws(
    () => createPolicy({ name: 'rl', params: { weights: weights(2, [0, 0, 0]), nope: 1 } }, Math.random),
    /nope/,
  );
});

test('shared head: scores every candidate with one network, whatever the fleet size', () => {
  // Q grows with free KV share: the emptiest backend wins, at any index, with 16 backends on
  // weights "trained on" 4.
  const p = rl({ random: Math.random, params: { weights: shared({ [FREE]: 1 }) } });
  const bs = Array.from({ length: 16 }, (_, i) => busy(`b${i}`, i));
  for (let i = 0; i < 16; i++) if (i !== 12) p.onDispatch!(requestInfo(`x${i}`, 'x'.repeat(800)), bs[i]!, 0);
  p.onDispatch!(requestInfo('x12', 'x'.repeat(40)), bs[12]!, 0);
  assert.equal(chosen(p.pick(requestInfo('r', 'hello'), bs, 0))?.name, 'b12');
});

test("shared head: permutation-equivariant (the candidates' order does not change the choice)", () => {
  const rng = createRng(5);
  const net = new MlpNet([F, 6, 1]);
  for (const w of [...net.w, ...net.b]) for (let i = 0; i < w.length; i++) w[i] = rng() * 2 - 1;
  const doc = { ...shared({}), net: net.toJSON() };
  const make = (): Policy => rl({ random: Math.random, params: { weights: doc } });
  const a = make();
  const b = make();
  const bs = Array.from({ length: 6 }, (_, i) => busy(`b${i}`, i));
  // Distinct starting work, so no two options tie (ties go to the first in order).
  for (const x of [a, b])
    bs.forEach((v, i) => {
      for (let j = 0; j <= i; j++) x.onDispatch!(requestInfo(`pre${i}.${j}`, 'z'.repeat(100 + 37 * i)), v, 0);
    });
  for (let k = 0; k < 30; k++) {
    const req = requestInfo(`r${k}`, 'y'.repeat(Math.floor(rng() * 2000)));
    const shuffled = [...bs].sort(() => rng() - 0.5);
    const x = chosen(a.pick(req, bs, k * 100))!;
    const y = chosen(b.pick(req, shuffled, k * 100))!;
    assert.equal(y.name, x.name);
    a.onDispatch!(req, x, k * 100);
    b.onDispatch!(req, y, k * 100);
  }
});

test('shared head: "wait" is scored only while the request fits nowhere and all are busy', () => {
  const p = rl({ random: Math.random, params: { weights: shared({ [WAIT]: 5, [FREE]: 1 }) } });
  const req = requestInfo('r1', 'x'.repeat(400));
  const [a, b] = [busy('a', 0), busy('b', 1)];
  assert.equal(chosen(p.pick(req, [a, b], 0))?.name, 'a'); // fits: no wait row
  p.onDispatch!(requestInfo('big-a', 'x'.repeat(4 * 2300)), a, 0);
  assert.equal(chosen(p.pick(req, [a, backendView('b', 1)], 0))?.name, 'b'); // b idle
  p.onDispatch!(requestInfo('big-b', 'x'.repeat(4 * 2300)), b, 0);
  assert.equal(p.pick(req, [a, b], 0), HOLD.untilChange); // redecide on-change
});

test('a held request is decided again when a backend changes (redecide: on-change), or at every event', () => {
  const asks = (params: Record<string, unknown>): number => {
    const p = createPolicy(
      { name: 'rl', params: { weights: shared({ [WAIT]: 5, [FREE]: 1 }), ...params } },
      Math.random,
    );
    let n = 0;
    const pick = p.pick.bind(p);
    p.pick = (r, c, now) => (r.id.startsWith('r') && n++, pick(r, c, now));
    const s = new Scheduler({ policy: p });
    for (const name of ['a', 'b'])
      s.addBackend({ name, api: 'ollama', models: ['m'], maxConcurrency: Infinity, weight: 1 });
    // Both backends' KV taken: the next request fits nowhere, and the network says wait.
    s.submit(requestInfo('big-a', 'x'.repeat(4 * 2300)), 0);
    s.submit(requestInfo('big-b', 'x'.repeat(4 * 2300)), 0);
    assert.deepEqual(s.submit(requestInfo('r1', 'x'.repeat(400)), 0), []);
    s.setMetrics('a', { running: 1, waiting: 0, kvUsage: 0.9, at: 1 });
    s.pump(1);
    assert.deepEqual(s.submit(requestInfo('r2', 'x'.repeat(400)), 2), []);
    return n;
  };
  assert.equal(asks({}), 2); // r1 once, r2 once: r1 waits for a backend to change
  assert.equal(asks({ redecide: 'every-event' }), 4); // r1 again at the probe's pump and at r2's
});

test('redecide: when-fits — a held request is decided again only once it fits in some backend', () => {
  const run = (redecide: string): { asks: number; r1: string | undefined } => {
    const p = createPolicy(
      { name: 'rl', params: { weights: shared({ [WAIT]: 5, [FREE]: 1 }), redecide } },
      Math.random,
    );
    let asks = 0;
    const pick = p.pick.bind(p);
    p.pick = (r, c, now) => (r.id === 'r1' && asks++, pick(r, c, now));
    const s = new Scheduler({ policy: p });
    for (const name of ['a', 'b'])
      s.addBackend({ name, api: 'ollama', models: ['m'], maxConcurrency: Infinity, weight: 1 });
    s.submit(requestInfo('big-a', 'x'.repeat(4 * 2300)), 0);
    s.submit(requestInfo('big-b', 'x'.repeat(4 * 2300)), 0);
    assert.deepEqual(s.submit(requestInfo('r1', 'x'.repeat(400)), 0), []); // fits nowhere: waits
    // A change that frees no KV: on-change decides r1 again, when-fits does not.
    assert.deepEqual(s.updateBackend('a', { weight: 2 }, 1), []);
    // big-a ends: r1 fits in a now, so it is decided again and dispatched ("wait" is not offered).
    const ds = s.complete('big-a', { ok: true, dispatchedAt: 0, finishedAt: 2, completionTokens: 10 }, 2);
    const d = ds.find((x) => x.request.id === 'r1');
    return { asks, r1: d?.type === 'dispatch' ? d.backend : undefined };
  };
  assert.deepEqual(run('on-change'), { asks: 3, r1: 'a' });
  assert.deepEqual(run('when-fits'), { asks: 2, r1: 'a' });
});

test('weights record the cadence they were trained under; a bad one is refused', () => {
  const doc = { ...(shared({}) as object), redecide: 'when-fits' };
  assert.equal(parseRlWeights(doc).meta.redecide, 'when-fits');
  assert.throws(() => parseRlWeights({ ...doc, redecide: 'sometimes' }), /redecide must be one of/);
  // The policy follows the file unless its parameters say otherwise.
  const p = createPolicy({ name: 'rl', params: { weights: doc } }, Math.random);
  assert.ok(p.traits?.fitGate, 'when-fits from the file');
  const q = createPolicy({ name: 'rl', params: { weights: doc, redecide: 'on-change' } }, Math.random);
  assert.equal(q.traits?.fitGate, undefined);
});

test('shared head: option rows are clipped to the training range', () => {
  const doc = shared({}) as unknown as RlWeights;
  const { net } = parseRlWeights(doc);
  const seen: Float64Array[] = [];
  const p = rlPolicyFrom(
    doc,
    net,
    { heavyPromptS: 0.5, heavyDecodeS: 5, priorPrefillS: 3.2e-4, priorDecodeS: 0.02, alpha: 0.2 },
    {
      act(rows, n) {
        seen.push(rows.slice(0, n * F));
        return 0;
      },
    },
  );
  const a: BackendView = busy('a', 0);
  // 300 flights (far past the 128 of training) and a 40k-token prompt waiting 100 s.
  for (let i = 0; i < 300; i++) p.onDispatch!(requestInfo(`f${i}`, 'x'), a, 0);
  p.pick(requestInfo('r', 'x'.repeat(160_000), { arrivedAt: 0 }), [a, busy('b', 1)], 100_000);
  const { lo, hi } = featureClip(3);
  const rows = seen[0]!;
  for (let i = 0; i < rows.length; i++) {
    assert.ok(rows[i]! >= lo[i % F]! && rows[i]! <= hi[i % F]!, `input ${i % F} = ${rows[i]}`);
  }
  assert.equal(rows[FLIGHTS], 4); // 300/32 clipped
  assert.equal(rows[0], 3); // 100 s of router wait clipped to 30 s
});

test('shared head: bad layouts are clear errors', () => {
  const ok = shared({});
  assert.throws(() => parseRlWeights({ ...ok, arch: 'cnn' }), /arch must be/);
  assert.throws(
    () => parseRlWeights({ ...ok, net: new MlpNet([F + 1, 2, 1]).toJSON() }),
    /net input must be 17/,
  );
  assert.throws(() => parseRlWeights({ ...ok, net: new MlpNet([F, 2, 3]).toJSON() }), /net output must be 1/);
  assert.doesNotThrow(() => parseRlWeights(ok));
});
