import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EngineModel } from './model.js';
import { defaultProfile, V100_LLAMA2_7B } from './profile.js';
import {
  contextBlockHashes,
  countTokens,
  drawOutputTokens,
  outputText,
  promptBlockHashes,
} from './tokens.js';
import { createRng } from '../core/rng.js';
import type { EngineEvent, EngineProfile, EngineSequence, EngineStats } from './types.js';

type Finished = Extract<EngineEvent, { type: 'finished' }>;

/** Round numbers so step times can be checked by hand. */
const P: EngineProfile = {
  slots: 2,
  kvCapacityTokens: 1000,
  speed: 1,
  baseStepS: 0.01,
  perSeqS: 0.001,
  perTokenS: 0.0001,
  prefillPerTokenS: 0.002,
  blockSize: 4,
  prefixCacheBlocks: 100,
};

const seq = (
  id: string,
  promptTokens: number,
  outputTokens: number,
  blockHashes: number[] = [],
): EngineSequence => ({
  id,
  promptTokens,
  outputTokens,
  blockHashes,
});

/** Run the model to idle, returning all events. */
function drain(m: EngineModel): EngineEvent[] {
  const all: EngineEvent[] = [];
  for (let t = m.nextEventTime(); t !== undefined; t = m.nextEventTime()) all.push(...m.advance(t));
  return all;
}

const finished = (evs: EngineEvent[]): Finished[] => evs.filter((e): e is Finished => e.type === 'finished');
const close = (a: number, b: number, msg?: string): void =>
  assert.ok(Math.abs(a - b) < 1e-9, msg ?? `${a} != ${b}`);

test('tokens: ceil(chars/4), output text counts exactly', () => {
  assert.equal(countTokens(''), 0);
  assert.equal(countTokens('a'), 1);
  assert.equal(countTokens('abcd'), 1);
  assert.equal(countTokens('abcde'), 2);
  const text = outputText(createRng(1), 37);
  assert.equal(countTokens(text), 37);
  assert.equal(outputText(createRng(1), 37), text, 'deterministic for a seed');
});

test('drawn output lengths: integers >= 1 around the mean', () => {
  const rng = createRng(5);
  let sum = 0;
  for (let i = 0; i < 20000; i++) {
    const n = drawOutputTokens(rng, 128);
    assert.ok(Number.isInteger(n) && n >= 1);
    sum += n;
  }
  assert.ok(Math.abs(sum / 20000 - 128) < 6, `mean ${sum / 20000}`);
  assert.equal(drawOutputTokens(rng, 1), 1);
});

test('block hashes: chained, full blocks only, shared prefixes share hashes', () => {
  const a = 'x'.repeat(64) + 'y'.repeat(64) + 'z'.repeat(10);
  const b = 'x'.repeat(64) + 'w'.repeat(64);
  const ha = promptBlockHashes(a, 16);
  const hb = promptBlockHashes(b, 16);
  assert.equal(ha.length, 2);
  assert.equal(hb.length, 2);
  assert.equal(ha[0], hb[0]);
  assert.notEqual(ha[1], hb[1]);
  // Same chunk at a different position hashes differently (it is a chain).
  const c = promptBlockHashes('x'.repeat(128), 16);
  assert.notEqual(c[0], c[1]);
  assert.ok(Number.isSafeInteger(ha[0]) && ha[0]! >= 0, 'a hash is an integer below 2^53');
  assert.deepEqual(promptBlockHashes('short', 16), []);
});

test('step time formula, by hand', () => {
  const m = new EngineModel(P);
  m.submit(seq('a', 100, 3), 5);
  // Prefill iteration: base + perSeq·1 + perToken·(100 prompt + 0 generated) + prefill·100.
  const t1 = 5 + 0.01 + 0.001 + 0.0001 * 100 + 0.002 * 100;
  close(m.nextEventTime()!, t1);
  const evs = m.advance(t1);
  assert.deepEqual(
    evs.map((e) => e.type),
    ['admitted', 'tokens'],
  );
  assert.equal(evs[0]!.t, 5, 'admitted at the iteration start');
  // Decode iterations: context grows by one token each.
  const t2 = t1 + 0.01 + 0.001 + 0.0001 * 101;
  const t3 = t2 + 0.01 + 0.001 + 0.0001 * 102;
  close(m.nextEventTime()!, t2);
  const rest = m.advance(100);
  const f = finished(rest)[0]!;
  close(f.t, t3);
  close(f.queuedS, 0);
  close(f.prefillS, t1 - 5);
  close(f.decodeS, t3 - t1);
  assert.equal(f.outputTokens, 3);
  assert.equal(m.nextEventTime(), undefined, 'idle');
  assert.equal(m.stats().kvUsage, 0);
});

test('advance catches up several iterations at once and leaves later ones', () => {
  const m = new EngineModel(P);
  m.submit(seq('a', 10, 50), 0);
  const evs = m.advance(0.1);
  const tokens = evs.filter((e) => e.type === 'tokens');
  assert.ok(tokens.length > 1 && tokens.length < 50);
  for (const e of evs) assert.ok(e.t <= 0.1);
  assert.ok(m.nextEventTime()! > 0.1);
});

test('slots: a third sequence waits until one finishes', () => {
  const m = new EngineModel(P);
  m.submit(seq('a', 10, 2), 0);
  m.submit(seq('b', 10, 5), 0);
  m.submit(seq('c', 10, 2), 0);
  m.nextEventTime();
  assert.deepEqual({ running: m.stats().running, waiting: m.stats().waiting }, { running: 2, waiting: 1 });
  const evs = drain(m);
  const fa = finished(evs).find((e) => e.id === 'a')!;
  const admitC = evs.find((e) => e.type === 'admitted' && e.id === 'c')!;
  close(admitC.t, fa.t, 'c admitted the moment a frees its slot');
  const fc = finished(evs).find((e) => e.id === 'c')!;
  close(fc.queuedS, fa.t);
});

test('KV: a sequence that does not fit waits (pending); an oversized one runs alone', () => {
  const m = new EngineModel({ ...P, slots: 8, kvCapacityTokens: 100 });
  m.submit(seq('a', 60, 3), 0);
  m.submit(seq('b', 60, 3), 0); // 61 + 61 > 100
  m.nextEventTime();
  assert.equal(m.stats().running, 1);
  assert.equal(m.stats().waiting, 1);
  assert.ok(m.stats().kvUsage > 0.6);
  const evs = drain(m);
  assert.equal(finished(evs).length, 2);
  const fb = finished(evs).find((e) => e.id === 'b')!;
  assert.ok(fb.queuedS > 0);

  const big = new EngineModel({ ...P, kvCapacityTokens: 100 });
  big.submit(seq('huge', 500, 2), 0);
  big.submit(seq('small', 5, 2), 0);
  big.nextEventTime();
  assert.equal(big.stats().running, 1, 'huge admitted alone');
  assert.equal(big.stats().kvUsage, 1, 'clamped');
  const out = finished(drain(big));
  assert.deepEqual(
    out.map((e) => e.id),
    ['huge', 'small'],
  );
});

test('prefix cache: a repeated prompt hits and has a shorter TTFT', () => {
  const m = new EngineModel(P);
  const text = 'p'.repeat(400); // 100 tokens = 25 blocks of 4
  const hashes = promptBlockHashes(text, P.blockSize);
  m.submit(seq('cold', 100, 1, hashes), 0);
  const cold = finished(drain(m))[0]!;
  m.submit(seq('warm', 100, 1, hashes), 10);
  const evs = drain(m);
  const warm = finished(evs)[0]!;
  assert.equal(cold.cachedTokens, 0);
  assert.equal(warm.cachedTokens, 99, 'capped at promptTokens - 1');
  const admitted = evs.find((e) => e.type === 'admitted')!;
  assert.equal(admitted.type === 'admitted' && admitted.cachedTokens, 99);
  assert.ok(warm.prefillS < cold.prefillS);
  close(cold.prefillS - warm.prefillS, 99 * 0.002, 'prefills 1 token instead of 100');
  const s = m.stats();
  assert.equal(s.prefixCacheQueries, 50);
  assert.equal(s.prefixCacheHits, 25);
});

test('prefix cache: only the shared prefix of a chain hits; LRU evicts', () => {
  const m = new EngineModel({ ...P, prefixCacheBlocks: 4 });
  const a = promptBlockHashes('a'.repeat(16) + 'b'.repeat(16), 4); // 2 blocks
  const b = promptBlockHashes('a'.repeat(16) + 'c'.repeat(16), 4); // shares block 0
  m.submit(seq('a', 8, 1, a), 0);
  drain(m);
  m.submit(seq('b', 8, 1, b), 1);
  const fb = finished(drain(m))[0]!;
  assert.equal(fb.cachedTokens, 4);
  // Fill the cache with 4 other blocks: 'a' is gone.
  m.submit(seq('x', 16, 1, promptBlockHashes('x'.repeat(64), 4)), 2);
  drain(m);
  m.submit(seq('a2', 8, 1, a), 3);
  assert.equal(finished(drain(m))[0]!.cachedTokens, 0);
});

test('speed 2 halves every time', () => {
  const run = (speed: number): Finished[] => {
    const m = new EngineModel({ ...P, speed });
    m.submit(seq('a', 50, 10), 0);
    m.submit(seq('b', 20, 4), 0);
    m.submit(seq('c', 30, 7), 0.05);
    return finished(drain(m));
  };
  const slow = run(1);
  const fast = run(2);
  // 'c' arrives at 0.05 in both; compare the two that started at 0.
  for (const id of ['a', 'b']) {
    const s = slow.find((e) => e.id === id)!;
    const f = fast.find((e) => e.id === id)!;
    close(f.t * 2, s.t);
    close(f.prefillS * 2, s.prefillS);
  }
});

test('cancel frees the slot and KV for the next sequence', () => {
  const m = new EngineModel({ ...P, slots: 1 });
  m.submit(seq('a', 10, 1000), 0);
  m.submit(seq('b', 10, 2), 0);
  m.advance(0.5);
  assert.equal(m.stats().running, 1);
  assert.equal(m.stats().waiting, 1);
  assert.equal(m.cancel('a', 0.5), true);
  assert.equal(m.cancel('a', 0.5), false, 'already gone');
  assert.equal(m.cancel('nope', 0.5), false);
  assert.equal(m.stats().running, 0);
  assert.equal(m.stats().kvUsage, 0);
  const evs = drain(m);
  assert.equal(evs.filter((e) => e.id === 'a').length, 0, 'no events for a cancelled sequence');
  assert.deepEqual(
    finished(evs).map((e) => e.id),
    ['b'],
  );
  // Cancelling a waiting sequence.
  m.submit(seq('c', 10, 100), 10);
  m.submit(seq('d', 10, 1), 10);
  m.nextEventTime();
  assert.equal(m.cancel('d', 10), true);
  assert.equal(m.stats().waiting, 0);
  assert.deepEqual(
    finished(drain(m)).map((e) => e.id),
    ['c'],
  );
  assert.equal(m.stats().completed, 2);
});

test('idle model starts at the submit time; same-instant submits batch together', () => {
  const m = new EngineModel(P);
  m.submit(seq('a', 10, 1), 3);
  m.submit(seq('b', 10, 1), 3);
  const evs = m.advance(3);
  assert.equal(evs.filter((e) => e.type === 'admitted').length, 2);
  assert.ok(evs.every((e) => e.t === 3));
  assert.equal(m.advance(2.9).length, 0);
});

/** Random workload with arrivals spread in time, driven like the simulator drives it. */
function randomRun(
  seed: number,
  tokenEvents = true,
): { events: EngineEvent[]; ids: string[]; m: EngineModel } {
  const rng = createRng(seed);
  const m = new EngineModel(defaultProfile({ slots: 6, kvCapacityTokens: 6000, prefixCacheBlocks: 64 }), {
    tokenEvents,
  });
  const ids: string[] = [];
  const events: EngineEvent[] = [];
  let t = 0;
  for (let i = 0; i < 300; i++) {
    t += rng() * 0.4;
    // Run the engine up to the arrival, then submit.
    for (let next = m.nextEventTime(); next !== undefined && next <= t; next = m.nextEventTime()) {
      events.push(...m.advance(next));
    }
    events.push(...m.advance(t));
    const id = `r${i}`;
    ids.push(id);
    const shared = 'sys '.repeat(Math.floor(rng() * 40));
    const text = shared + 'u'.repeat(Math.floor(rng() * 2000));
    m.submit(seq(id, countTokens(text), 1 + Math.floor(rng() * 200), promptBlockHashes(text, 16)), t);
    if (rng() < 0.05) m.cancel(`r${i - 1}`, t);
  }
  events.push(...drain(m));
  return { events, ids, m };
}

test('without the id index, cancel finds the same sequences (waiting, running, preempted or gone)', () => {
  const run = (indexById: boolean): { log: unknown[]; stats: EngineStats } => {
    const rng = createRng(5);
    const profile = defaultProfile({ slots: 4, kvCapacityTokens: 3000, pagedKv: true, prefillMode: 'stall' });
    const m = new EngineModel(profile, { tokenEvents: false, indexById });
    const log: unknown[] = [];
    let t = 0;
    for (let i = 0; i < 400; i++) {
      t += rng() * 0.2;
      log.push(...m.advance(t));
      m.submit(seq(`r${i}`, 50 + Math.floor(rng() * 900), 1 + Math.floor(rng() * 150)), t);
      // Any earlier id: waiting, running, preempted, finished or already cancelled.
      if (rng() < 0.2) log.push(m.cancel(`r${Math.floor(rng() * (i + 1))}`, t));
    }
    log.push(...drain(m));
    return { log, stats: m.stats() };
  };
  const indexed = run(true);
  const searched = run(false);
  assert.ok(indexed.log.filter((x) => x === true).length > 20);
  assert.ok(indexed.log.filter((x) => x === false).length > 5);
  assert.ok(indexed.stats.preemptions > 0);
  assert.deepEqual(searched, indexed);
});

test('determinism: same inputs, same events', () => {
  const a = randomRun(7);
  const b = randomRun(7);
  assert.deepEqual(a.events, b.events);
  assert.deepEqual(a.m.stats(), b.m.stats());
});

test('conservation: every submitted sequence finishes exactly once (or was cancelled)', () => {
  const { events, ids, m } = randomRun(11);
  const done = new Map<string, number>();
  for (const e of finished(events)) done.set(e.id, (done.get(e.id) ?? 0) + 1);
  for (const n of done.values()) assert.equal(n, 1);
  const cancelled = ids.filter((id) => !done.has(id));
  const s = m.stats();
  assert.equal(s.completed + cancelled.length, ids.length);
  assert.equal(s.running, 0);
  assert.equal(s.waiting, 0);
  assert.equal(s.kvUsage, 0);
  // Events are in time order, and each finished sequence got exactly outputTokens tokens events.
  for (let i = 1; i < events.length; i++) assert.ok(events[i]!.t >= events[i - 1]!.t);
  for (const f of finished(events)) {
    const toks = events.filter((e) => e.type === 'tokens' && e.id === f.id);
    assert.equal(toks.length, f.outputTokens);
    const admitted = events.find((e) => e.type === 'admitted' && e.id === f.id)!;
    close(admitted.t + f.prefillS + f.decodeS, f.t);
    assert.ok(f.queuedS >= 0 && f.prefillS > 0 && f.decodeS >= 0);
  }
  assert.ok(s.prefixCacheHits > 0 && s.prefixCacheHits <= s.prefixCacheQueries);
  // Turning token events off changes nothing else.
  const quiet = randomRun(11, false);
  assert.deepEqual(
    quiet.events,
    events.filter((e) => e.type !== 'tokens'),
  );
});

test('default profile: 500-token prompt + 200 tokens alone takes 3-5 s', () => {
  const m = new EngineModel(defaultProfile());
  m.submit(seq('a', 500, 200), 0);
  const f = finished(drain(m))[0]!;
  assert.ok(f.t > 3 && f.t < 5, `took ${f.t}`);
});

test('invalid profile is refused', () => {
  assert.throws(() => new EngineModel({ ...P, slots: 0 }), /slots/);
  assert.throws(() => new EngineModel({ ...P, speed: -1 }), /speed/);
});

// How fast this runs is bench:sim's to measure; a unit test checks only that it all completes.
test('thousands of sequences over tens of thousands of iterations all complete', () => {
  const m = new EngineModel(defaultProfile({ slots: 32, kvCapacityTokens: 200000 }), { tokenEvents: false });
  for (let i = 0; i < 5000; i++) m.submit(seq(`s${i}`, 300, 200), i * 0.01);
  let iterations = 0;
  for (let t = m.nextEventTime(); t !== undefined; t = m.nextEventTime()) {
    m.advance(t);
    iterations++;
  }
  assert.equal(m.stats().completed, 5000);
  assert.ok(iterations > 30000);
});

test('pagedKv: running sequences hold one copy of a shared prefix, so more of them fit', () => {
  // 100-token prompts sharing their first 96 tokens (24 blocks of 4); KV room for 150 tokens.
  const common = 'p'.repeat(384);
  const mk = (id: string) => seq(id, 100, 5, promptBlockHashes(common + id.repeat(16), 4));
  const base = { ...P, slots: 8, kvCapacityTokens: 150 };
  const admittedAt0 = (profile: EngineProfile): number => {
    const m = new EngineModel(profile);
    for (const id of ['a', 'b', 'c']) m.submit(mk(id), 0);
    m.nextEventTime();
    return m.stats().running;
  };
  // Without sharing each needs 101 tokens: one at a time. With it the second and third need only
  // their own block + 1 (5 + 1 tokens each) beside the 96 shared ones.
  assert.equal(admittedAt0(base), 1);
  assert.equal(admittedAt0({ ...base, pagedKv: true }), 3);
  const m = new EngineModel({ ...base, pagedKv: true });
  for (const id of ['a', 'b', 'c']) m.submit(mk(id), 0);
  m.nextEventTime();
  // 24 shared blocks (96) + 3 own blocks (12) + 3 reserved next tokens = 111 of 150.
  close(m.stats().kvUsage, 111 / 150, 'kv usage counts shared blocks once');
  const done = finished(drain(m));
  assert.equal(done.length, 3);
  // The siblings found the first one's blocks in use: hits without any cache entry yet.
  assert.deepEqual(
    done.map((f) => f.cachedTokens),
    [0, 96, 96],
  );
  assert.equal(m.stats().kvUsage, 0, 'everything released at the end');
});

test('pagedKv: the cache lives in the room the batch leaves (a busy engine forgets)', () => {
  const profile: EngineProfile = { ...P, slots: 8, kvCapacityTokens: 200, pagedKv: true };
  const hot = promptBlockHashes('h'.repeat(160), 4); // 40 tokens, 10 blocks
  const m = new EngineModel(profile);
  m.submit(seq('first', 40, 1, hot), 0);
  drain(m);
  // Idle engine: the finished prompt's blocks stay cached.
  m.submit(seq('again', 40, 1, hot), 1);
  assert.equal(finished(drain(m))[0]!.cachedTokens, 39);
  // A long sequence of 180 unrelated tokens leaves room for 4 cached blocks: the 10 hot ones go.
  m.submit(seq('big', 180, 50, promptBlockHashes('z'.repeat(720), 4)), 2);
  m.submit(seq('late', 40, 1, hot), 2.5);
  const evs = drain(m);
  const late = finished(evs).find((f) => f.id === 'late')!;
  assert.equal(late.cachedTokens, 0, 'evicted while the batch was full');
  // …and the same request on an engine with a separate cache would still hit.
  const sep = new EngineModel({ ...profile, pagedKv: false, kvCapacityTokens: 400 });
  sep.submit(seq('first', 40, 1, hot), 0);
  drain(sep);
  sep.submit(seq('big', 180, 50, promptBlockHashes('z'.repeat(720), 4)), 2);
  sep.submit(seq('late', 40, 1, hot), 2.5);
  assert.equal(finished(drain(sep)).find((f) => f.id === 'late')!.cachedTokens, 39);
});

test('pagedKv: a batch that outgrows the pool preempts its newest sequence, which recomputes later', () => {
  const profile: EngineProfile = { ...P, slots: 8, kvCapacityTokens: 100, pagedKv: true };
  const m = new EngineModel(profile);
  m.submit(seq('a', 30, 50), 0);
  m.submit(seq('b', 30, 50), 0);
  m.nextEventTime();
  assert.equal(m.stats().running, 2, 'both fit at admission (31 + 31 of 100)');
  const evs = drain(m);
  const [a, b] = ['a', 'b'].map((id) => finished(evs).find((f) => f.id === id)!);
  // Growing by 2 tokens a step, the pair overflows 100 after ~19 tokens each: b (newest) is preempted.
  assert.equal(m.stats().preemptions, 1);
  assert.equal(a!.outputTokens, 50);
  assert.equal(b!.outputTokens, 50, 'b generates on from where it was, no token twice');
  assert.equal(m.stats().generatedTokens, 100);
  assert.ok(b!.t > a!.t, 'b finishes after a: it waited and recomputed');
  // Without pagedKv the same pair overflows unpunished and finishes together.
  const loose = new EngineModel({ ...profile, pagedKv: false });
  loose.submit(seq('a', 30, 50), 0);
  loose.submit(seq('b', 30, 50), 0);
  const le = finished(drain(loose));
  assert.equal(le[0]!.t, le[1]!.t);
  assert.equal(loose.stats().preemptions, 0);
});

test("generated tokens: a finished sequence's answer is cached, so a follow-up that resends it hits it", () => {
  const prompt = 'q'.repeat(160); // 40 tokens, 10 blocks of 4
  const answer = outputText(createRng(3), 24); // 24 tokens
  const hashes = promptBlockHashes(prompt, 4);
  const context = contextBlockHashes(prompt, hashes, answer, 4);
  const followUp = `${prompt}\n${answer}\nand then?`;
  const next = promptBlockHashes(followUp, 4);
  const nextTokens = countTokens(followUp);
  for (const pagedKv of [false, true]) {
    const run = (withContext: boolean): Finished => {
      const m = new EngineModel({ ...P, pagedKv });
      m.submit({ ...seq('turn1', 40, 24, hashes), contextBlockHashes: withContext ? context : undefined }, 0);
      drain(m);
      m.submit(seq('turn2', nextTokens, 1, next), 10);
      return finished(drain(m))[0]!;
    };
    const kept = run(true);
    const dropped = run(false);
    assert.equal(dropped.cachedTokens, 40, `pagedKv ${pagedKv}: without the answer only the prompt hits`);
    assert.equal(kept.cachedTokens, context.length * 4, `pagedKv ${pagedKv}: prompt and answer hit`);
    assert.ok(context.length * 4 > 40 + 20, 'the answer added blocks');
    assert.ok(kept.prefillS < dropped.prefillS);
  }
  // pagedKv: the answer's blocks are cache like any other, kept only in the room the batch leaves.
  const m = new EngineModel({ ...P, slots: 8, kvCapacityTokens: 200, pagedKv: true });
  m.submit({ ...seq('turn1', 40, 24, hashes), contextBlockHashes: context }, 0);
  m.submit(seq('big', 180, 80, promptBlockHashes('z'.repeat(720), 4)), 0.001);
  m.submit(seq('turn2', nextTokens, 1, next), 1);
  const t2 = finished(drain(m)).find((f) => f.id === 'turn2')!;
  assert.ok(t2.cachedTokens < context.length * 4, 'a full batch evicted part of it');
});

test("prefillMode 'stall': an arriving prompt's prefill step stalls the batch's decodes (vLLM v0)", () => {
  const m = new EngineModel({ ...P, prefillMode: 'stall' });
  m.submit(seq('a', 10, 3), 0);
  // Iteration 1 prefills a alone: 0.01 + 0.001 + 10·0.002 = 0.031.
  const e1 = m.advance(m.nextEventTime()!);
  close(e1.find((e) => e.type === 'tokens')!.t, 0.031);
  // Iteration 2 (a decodes) started at 0.031 before b arrives: 0.01 + 0.001 + 11·0.0001 = 0.0121.
  m.submit(seq('b', 20, 1), 0.031);
  const evs = drain(m);
  // Iteration 3 prefills b only (0.01 + 0.001 + 20·0.002 = 0.051): a generates nothing in it.
  const b = finished(evs).find((f) => f.id === 'b')!;
  close(b.t, 0.0431 + 0.051);
  const aTokens = evs.filter((e) => e.type === 'tokens' && e.id === 'a').map((e) => e.t);
  assert.equal(aTokens.length, 2);
  close(aTokens[0]!, 0.0431);
  // Iteration 4: a decodes its third token over 12 context tokens.
  close(aTokens[1]!, 0.0941 + 0.01 + 0.001 + 12 * 0.0001);
});

test("prefillMode 'chunked': a prompt is prefilled in budget-sized chunks, decodes go first", () => {
  const m = new EngineModel({ ...P, prefillMode: 'chunked', maxBatchedTokens: 8 });
  m.submit(seq('a', 20, 2), 0);
  const f = finished(drain(m))[0]!;
  // Chunks 8, 8, 4 (each iteration: 0.01 + 0.001 + 20·0.0001 + chunk·0.002), then one decode.
  const ttft = 0.029 + 0.029 + 0.021;
  close(f.prefillS, ttft);
  close(f.t, ttft + 0.01 + 0.001 + 21 * 0.0001);
  // A decoding sequence keeps generating while a long prompt is chunked beside it.
  const m2 = new EngineModel({ ...P, prefillMode: 'chunked', maxBatchedTokens: 8 });
  m2.submit(seq('d', 2, 6), 0);
  m2.advance(m2.nextEventTime()!);
  m2.submit(seq('long', 40, 1), m2.nextEventTime()!);
  const evs = drain(m2);
  const dDone = finished(evs).find((e) => e.id === 'd')!.t;
  const longDone = finished(evs).find((e) => e.id === 'long')!.t;
  assert.ok(dDone < longDone, 'decodes are not held behind the chunked prompt');
  assert.throws(
    () => new EngineModel({ ...P, prefillMode: 'chunked', maxBatchedTokens: 0 }),
    /maxBatchedTokens/,
  );
});

test('the performance-aware router §3: p = d = 1000 alone ≈ 17 s; p = d = 500 arriving every 50 iterations slows it (seed: 31 s)', () => {
  const profile = defaultProfile({
    ...V100_LLAMA2_7B,
    slots: 128,
    kvCapacityTokens: 16384,
    prefixCacheBlocks: 0,
  });
  const run = (arrivals: boolean): number => {
    const m = new EngineModel(profile);
    m.submit(seq('first', 1000, 1000), 0);
    let k = 0;
    for (let t = m.nextEventTime(); t !== undefined; t = m.nextEventTime()) {
      for (const e of m.advance(t)) {
        if (arrivals && e.type === 'tokens' && e.id === 'first' && e.total % 50 === 0)
          m.submit(seq(`x${k++}`, 500, 500), e.t);
        if (e.type === 'finished' && e.id === 'first') return e.t;
      }
    }
    throw new Error('first never finished');
  };
  const alone = run(false);
  const mixed = run(true);
  assert.ok(alone > 16 && alone < 19, `alone ${alone}`);
  // The model gives ~26.8 s: prefill stalls (~3.6 s) and attention over the others' context (~5.7 s).
  assert.ok(mixed > 25 && mixed < 33, `with arrivals ${mixed}`);
});
