import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRng } from '../core/rng.js';
import { MlpNet } from '../core/estimators/mlp.js';
import { DoubleDqn, SharedHeadDqn } from './dqn.js';
import { Mlp } from './mlp.js';

test('MLP gradient check: backward matches central differences of ½‖f(x) − y‖²', () => {
  const m = new Mlp([5, 7, 6, 3], createRng(3));
  const rng = createRng(4);
  const x = Array.from({ length: 5 }, () => rng() * 2 - 1);
  const y = [0.3, -0.2, 1];
  const loss = (): number => {
    const o = m.forward(x);
    let s = 0;
    for (let k = 0; k < 3; k++) s += 0.5 * (o[k]! - y[k]!) ** 2;
    return s;
  };
  m.zeroGrad();
  const o = m.forward(x);
  m.backward(Array.from(o, (v, k) => v - y[k]!));
  let checked = 0;
  for (let l = 0; l < m.w.length; l++) {
    for (const [p, g] of [
      [m.w[l]!, m.gw[l]!],
      [m.b[l]!, m.gb[l]!],
    ] as const) {
      for (let i = 0; i < p.length; i++) {
        const keep = p[i]!;
        const h = 1e-6;
        p[i] = keep + h;
        const up = loss();
        p[i] = keep - h;
        const down = loss();
        p[i] = keep;
        const numeric = (up - down) / (2 * h);
        assert.ok(Math.abs(numeric - g[i]!) < 1e-5, `layer ${l} param ${i}: ${numeric} vs ${g[i]}`);
        checked++;
      }
    }
  }
  assert.equal(checked, 5 * 7 + 7 + 7 * 6 + 6 + 6 * 3 + 3);
});

test('MLP JSON round trip; malformed weights are refused with a clear error', () => {
  const m = new Mlp([3, 4, 2], createRng(1));
  const back = Mlp.fromJSON(JSON.parse(JSON.stringify(m.toJSON())));
  assert.deepEqual(Array.from(back.forward([0.1, 0.2, 0.3])), Array.from(m.forward([0.1, 0.2, 0.3])));
  assert.throws(() => Mlp.fromJSON({ sizes: [3, 4, 2], layers: [] }), /layers must match sizes/);
  assert.throws(() => Mlp.fromJSON('nope'), /not an object/);
  const j = m.toJSON();
  assert.throws(
    () => Mlp.fromJSON({ ...j, layers: [{ ...j.layers[0]!, w: j.layers[0]!.w.slice(1) }, j.layers[1]] }),
    /layer 0: w must be 12/,
  );
});

test('Double DQN, 2-backend toy: learns to send a request to the less loaded backend (deterministic)', () => {
  const train = (): { agent: DoubleDqn; acc: number } => {
    const rng = createRng(11);
    const agent = new DoubleDqn({ sizes: [2, 16, 2], lr: 5e-3, batch: 32, targetEvery: 50 }, createRng(12));
    // One decision per episode: state = the two loads, reward = −load of the chosen backend.
    for (let step = 0; step < 1500; step++) {
      const s = Float64Array.from([rng(), rng()]);
      const a = agent.act(s, Math.max(0.05, 1 - step / 800));
      agent.buffer.push({ s, a, r: -s[a]!, s2: undefined, gamma: 0.9 });
      agent.learn();
    }
    const test = createRng(99);
    let right = 0;
    for (let i = 0; i < 500; i++) {
      const s = [test(), test()];
      if (agent.greedy(s) === (s[0]! < s[1]! ? 0 : 1)) right++;
    }
    return { agent, acc: right / 500 };
  };
  const { agent, acc } = train();
  assert.ok(acc > 0.9, `toy accuracy ${acc}`);
  assert.deepEqual(train().agent.toJSON(), agent.toJSON());
  // The Double-DQN target: r + γ·Q_target(s2, argmax Q_online(s2)).
  const s2 = Float64Array.from([0.2, 0.9]);
  const a2 = agent.greedy(s2);
  const want = 1 + 0.5 * agent.target.forward(s2)[a2]!;
  assert.equal(agent.targetOf({ s: s2, a: 0, r: 1, s2, gamma: 0.5 }), want);
});

test('the core inference net reads what training writes and computes the same outputs', () => {
  const m = new Mlp([4, 5, 3], createRng(8));
  const core = MlpNet.fromJSON(JSON.parse(JSON.stringify(m.toJSON())));
  const x = Float64Array.from([0.3, -1, 0.5, 2, 9, 9, 9, 9]);
  assert.deepEqual(Array.from(core.forward(x.subarray(0, 4))), Array.from(m.forward(x.subarray(0, 4))));
  assert.deepEqual(Array.from(core.forwardAt(x, 0)), Array.from(m.forward(x.subarray(0, 4))));
  // Rows sharing their first 2 inputs: the shared first-layer part computed once gives the same outputs.
  const rows = Float64Array.from([0.3, -1, 0.5, 2, 0.3, -1, -0.7, 0.1, 0.3, -1, 4, -3]);
  core.prepareShared(rows, 2);
  for (let r = 0; r < 3; r++) {
    const want = Array.from(m.forward(rows.subarray(4 * r, 4 * r + 4)));
    Array.from(core.forwardRest(rows, 4 * r)).forEach((v, k) => assert.ok(Math.abs(v - want[k]!) < 1e-12));
  }
});

test('shared-head DQN, 2-backend toy: one head scoring each backend row learns the less loaded', () => {
  const train = (): { agent: SharedHeadDqn; acc: number } => {
    const rng = createRng(21);
    const agent = new SharedHeadDqn(
      { sizes: [2, 16, 1], lr: 5e-3, batch: 32, targetEvery: 50 },
      createRng(22),
    );
    // Each option's row: [its load, the other's load]; reward = −load of the chosen backend.
    const rows = (l0: number, l1: number): Float64Array => Float64Array.from([l0, l1, l1, l0]);
    for (let step = 0; step < 1500; step++) {
      const l = [rng(), rng()];
      const s = rows(l[0]!, l[1]!);
      const a = agent.act(s, Math.max(0.05, 1 - step / 800));
      agent.buffer.push({ s, a, r: -l[a]!, s2: undefined, gamma: 0.9 });
      agent.learn();
    }
    const test = createRng(99);
    let right = 0;
    for (let i = 0; i < 500; i++) {
      const l = [test(), test()];
      if (agent.greedy(rows(l[0]!, l[1]!)) === (l[0]! < l[1]! ? 0 : 1)) right++;
    }
    return { agent, acc: right / 500 };
  };
  const { agent, acc } = train();
  assert.ok(acc > 0.9, `toy accuracy ${acc}`);
  assert.deepEqual(train().agent.toJSON(), agent.toJSON());
  // Three backends at once with the same head (trained on two): still the least loaded.
  const three = Float64Array.from([0.9, 0.2, 0.2, 0.1, 0.5, 0.2]);
  assert.equal(agent.greedy(three), 1);
  // Double-DQN target over a next state of a different option count.
  const s2 = Float64Array.from([0.2, 0.9, 0.9, 0.2, 0.5, 0.5]);
  const a2 = agent.greedy(s2);
  const want = 1 + 0.5 * agent.target.forwardAt(s2, a2 * 2)[0]!;
  assert.equal(agent.targetOf({ s: s2, a: 0, r: 1, s2, gamma: 0.5 }), want);
});
