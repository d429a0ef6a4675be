import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EngineModel, validateProfile } from './model.js';
import type { EngineEvent, EngineProfile, EngineSequence } from './types.js';

type Finished = Extract<EngineEvent, { type: 'finished' }>;

/** Round numbers: a step with one sequence and no prefill costs 0.011 s plus context. */
const P: EngineProfile = {
  slots: 4,
  kvCapacityTokens: 1000,
  speed: 1,
  baseStepS: 0.01,
  perSeqS: 0.001,
  perTokenS: 0,
  prefillPerTokenS: 0,
  blockSize: 4,
  prefixCacheBlocks: 0,
  lora: { maxLora: 1, swapS: 0.5, adapters: ['a', 'b', 'c'] },
};

const seq = (id: string, model: string | undefined, outputTokens: number): EngineSequence => ({
  id,
  promptTokens: 8,
  outputTokens,
  blockHashes: [],
  model,
});

function drain(m: EngineModel): Finished[] {
  const all: EngineEvent[] = [];
  for (let t = m.nextEventTime(); t !== undefined; t = m.nextEventTime()) all.push(...m.advance(t));
  return all.filter((e): e is Finished => e.type === 'finished');
}

const close = (a: number, b: number, msg?: string): void =>
  assert.ok(Math.abs(a - b) < 1e-9, msg ?? `${a} != ${b}`);

test('lora: loading an adapter stalls the admitting iteration by swapS; a loaded one costs nothing', () => {
  const m = new EngineModel(P, { tokenEvents: false });
  m.submit(seq('x', 'a', 1), 0);
  const [x] = drain(m);
  close(x!.t, 0.011 + 0.5, 'first use: one step plus the load');
  m.submit(seq('y', 'a', 1), 10);
  const [y] = drain(m);
  close(y!.t, 10.011, 'loaded: one step');
  assert.equal(m.stats().loraLoads, 1);
});

test('lora: a request whose adapter finds every slot in use waits; later ones for loaded adapters go ahead', () => {
  const m = new EngineModel(P, { tokenEvents: false });
  m.submit(seq('a1', 'a', 3), 0);
  m.submit(seq('b1', 'b', 1), 0);
  m.submit(seq('a2', 'a', 1), 0);
  m.submit(seq('base', undefined, 1), 0);
  m.nextEventTime();
  // a1, a2 and the base model's request run; b1 waits for the one slot, held by a.
  assert.equal(m.batchSize, 3);
  assert.equal(m.queueLength, 1);
  assert.deepEqual(m.loraInfo(), { maxLora: 1, running: ['a'], waiting: ['b'], loaded: ['a'] });
  const done = drain(m);
  assert.deepEqual(
    done.map((f) => f.id),
    ['a2', 'base', 'a1', 'b1'],
  );
  const b1 = done.find((f) => f.id === 'b1')!;
  const a1 = done.find((f) => f.id === 'a1')!;
  assert.ok(b1.queuedS > 0 && b1.t > a1.t, 'b1 admitted only once a1 left the slot');
  assert.equal(m.stats().loraLoads, 2);
  assert.deepEqual(m.loraInfo()!.loaded, ['b'], 'a evicted for b');
});

test('lora: loading evicts the least recently used idle adapter', () => {
  const m = new EngineModel({ ...P, lora: { maxLora: 2, swapS: 0.5, adapters: ['a', 'b', 'c'] } });
  m.submit(seq('1', 'a', 1), 0);
  drain(m);
  m.submit(seq('2', 'b', 1), 1);
  drain(m);
  m.submit(seq('3', 'a', 1), 2); // a is now the most recent
  drain(m);
  m.submit(seq('4', 'c', 1), 3); // evicts b
  drain(m);
  assert.deepEqual(m.loraInfo()!.loaded, ['a', 'c']);
  assert.equal(m.stats().loraLoads, 3);
  m.submit(seq('5', 'a', 1), 4);
  const [f] = drain(m);
  close(f!.t, 4.011, 'a stayed loaded');
});

test('lora: a cancelled running request frees its adapter for a waiting one', () => {
  const m = new EngineModel(P);
  m.submit(seq('a1', 'a', 100), 0);
  m.submit(seq('b1', 'b', 1), 0);
  m.advance(m.nextEventTime()!);
  assert.deepEqual(m.loraInfo()!.waiting, ['b']);
  assert.ok(m.cancel('a1', 1));
  const done = drain(m);
  assert.deepEqual(
    done.filter((e) => e.type === 'finished').map((f) => f.id),
    ['b1'],
  );
});

test('lora: chunked prefill pays the load too; an unknown model runs on the base', () => {
  const m = new EngineModel({ ...P, prefillMode: 'chunked' }, { tokenEvents: false });
  m.submit(seq('x', 'a', 1), 0);
  m.submit(seq('z', 'not-an-adapter', 1), 0);
  const done = drain(m);
  close(done[0]!.t, 0.01 + 0.002 + 0.5);
  assert.equal(m.stats().loraLoads, 1);
});

test('lora: without a lora section, a model name changes nothing', () => {
  const { lora: _lora, ...plain } = P;
  const m = new EngineModel(plain, { tokenEvents: false });
  m.submit(seq('x', 'a', 1), 0);
  const [x] = drain(m);
  close(x!.t, 0.011);
  assert.equal(m.loraInfo(), undefined);
});

test('lora: profile validation', () => {
  assert.throws(() => validateProfile({ ...P, lora: { maxLora: 0, swapS: 0 } }), /lora.maxLora/);
  assert.throws(() => validateProfile({ ...P, lora: { maxLora: 1, swapS: -1 } }), /lora.swapS/);
});

test('lora: waking at quietUntil finishes exactly what waking every iteration does, never earlier', () => {
  const profile: EngineProfile = {
    ...P,
    slots: 6,
    perTokenS: 1e-5,
    prefillPerTokenS: 1e-4,
    lora: { maxLora: 2, swapS: 0.05, adapters: ['a', 'b', 'c', 'd', 'e'] },
  };
  // 200 requests over 10 s on 5 adapters and the base model (a fixed pseudo-random stream).
  let x = 7;
  const rnd = (): number => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
  const subs = Array.from({ length: 200 }, (_, i) => ({
    t: i * 0.05,
    s: {
      ...seq(
        `s${i}`,
        ['a', 'b', 'c', 'd', 'e', undefined][Math.floor(rnd() * 6)],
        1 + Math.floor(rnd() * 60),
      ),
    },
  }));
  const run = (lazy: boolean): Finished[] => {
    const m = new EngineModel(profile, { tokenEvents: false, admitEvents: false });
    const out: Finished[] = [];
    let k = 0;
    for (;;) {
      const wake = lazy ? m.quietUntil(64) : m.nextEventTime();
      const sub = k < subs.length ? subs[k]!.t : undefined;
      if (wake === undefined && sub === undefined) break;
      const at = Math.min(wake ?? Infinity, sub ?? Infinity);
      for (const e of m.advance(at)) {
        if (e.type !== 'finished') continue;
        assert.ok(
          wake !== undefined && e.t >= wake,
          `${e.id} finished at ${e.t}, before the wake at ${wake}`,
        );
        out.push(e);
      }
      while (k < subs.length && subs[k]!.t === at) m.submit(subs[k++]!.s, at);
    }
    return out;
  };
  const every = run(false);
  assert.equal(every.length, 200);
  assert.deepEqual(run(true), every);
});
