import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRng } from '../../../rng.js';
import { backendView, makePlugin, requestInfo, scoresOf } from '../../../testing.js';
import type { BackendView } from '../../../types.js';
import { blockHashes, isPrefixHitSource } from './prefix-cache-scorer.js';

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

/**
 * The scorer as first written (a Set of candidate positions per call, one holder lookup per
 * candidate per block), with the same LRU bookkeeping: what the faster walk must keep giving.
 */
function referenceScorer(blockSize: number, maxBlocks: number, capacity: number) {
  const lru = new Map<string, Map<number, true>>();
  const holders = new Map<number, Set<string>>();
  const forget = (backend: string, h: number): void => {
    const s = holders.get(h);
    if (!s) return;
    s.delete(backend);
    if (s.size === 0) holders.delete(h);
  };
  return {
    dispatch(text: string, backend: string): void {
      let m = lru.get(backend);
      if (!m) lru.set(backend, (m = new Map()));
      for (const h of blockHashes(text, blockSize, maxBlocks)) {
        if (m.delete(h)) m.set(h, true);
        else {
          m.set(h, true);
          let s = holders.get(h);
          if (!s) holders.set(h, (s = new Set()));
          s.add(backend);
          if (m.size > capacity) {
            const old = m.keys().next().value!;
            m.delete(old);
            forget(backend, old);
          }
        }
      }
    },
    remove(backend: string): void {
      const m = lru.get(backend);
      if (!m) return;
      for (const h of m.keys()) forget(backend, h);
      lru.delete(backend);
    },
    score(text: string, candidates: readonly BackendView[]): { scores: number[]; hit: boolean } {
      const hashes = blockHashes(text, blockSize, maxBlocks);
      const out = candidates.map(() => 0);
      let hit = false;
      if (hashes.length > 0) {
        const alive = new Set<number>(candidates.keys());
        for (let b = 0; b < hashes.length && alive.size > 0; b++) {
          const s = holders.get(hashes[b]!);
          for (const i of alive) {
            if (s?.has(candidates[i]!.name)) out[i]!++;
            else alive.delete(i);
          }
        }
        for (let i = 0; i < candidates.length; i++) {
          if (out[i]! > 0) hit = true;
          out[i] = out[i]! / hashes.length;
        }
      }
      return { scores: out, hit };
    },
  };
}

test('prefix-cache-scorer matches the reference when candidates change order, subset and size between calls', () => {
  const params = { hashBlockSize: 8, maxPrefixBlocksToMatch: 12, lruCapacityPerServer: 10 };
  const s = makePlugin('scorer', 'prefix-cache-scorer', params);
  assert.ok(isPrefixHitSource(s));
  const ref = referenceScorer(
    params.hashBlockSize,
    params.maxPrefixBlocksToMatch,
    params.lruCapacityPerServer,
  );
  const rnd = createRng(42);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const fleet = Array.from({ length: 12 }, (_, i) => backendView(`b${i}`, i));
  // Conversations over 3 shared system prompts (5 blocks each) that grow turn by turn: prompts
  // share leading blocks, and the small LRU evicts leading blocks, so held blocks are not prefixes.
  const systems = [
    'You are helpful. Be brief.. ',
    'Answer in French, please!!! ',
    'Think step by step, kindly. ',
  ];
  const convos: string[] = [];
  const prompt = (): string => {
    if (convos.length > 0 && rnd() < 0.6) return pick(convos);
    let t = rnd() < 0.2 ? '' : pick(systems);
    while (t.length < 8 + rnd() * 100) t += pick(['ab', 'cd', 'ef', 'gh ', 'ij']);
    return t;
  };
  const candidates = (): BackendView[] => {
    // A shuffled subset (sometimes all, sometimes none), now and then with a backend twice.
    const c = fleet.filter(() => rnd() < 0.7);
    for (let i = c.length - 1; i > 0; i--) {
      const j = Math.floor(rnd() * (i + 1));
      [c[i], c[j]] = [c[j]!, c[i]!];
    }
    if (c.length > 0 && rnd() < 0.1) c.splice(Math.floor(rnd() * c.length), 0, pick(c));
    return c;
  };
  let id = 0;
  let partial = 0;
  let full = 0;
  for (let step = 0; step < 3000; step++) {
    const r = rnd();
    if (r < 0.45) {
      const text = prompt();
      const turn = rnd() < 0.5 ? text + ' more words' : text;
      if (!convos.includes(turn)) convos.push(turn);
      const b = pick(fleet);
      s.onDispatch!(requestInfo(String(id++), turn), b, 0);
      ref.dispatch(turn, b.name);
    } else if (r < 0.47) {
      const b = pick(fleet);
      s.onBackendRemoved!(b.name);
      ref.remove(b.name);
    } else {
      // The same request scored against two different candidate lists, as a retry would.
      const req = requestInfo(String(id++), prompt());
      for (let k = 0; k < 2; k++) {
        const c = candidates();
        const want = ref.score(req.promptText, c);
        assert.deepEqual(scoresOf(s, req, c), want.scores, `step ${step}: ${c.map((b) => b.name).join(',')}`);
        assert.equal(s.prefixHit(req), want.hit);
        for (const x of want.scores) {
          if (x > 0 && x < 1) partial++;
          if (x === 1) full++;
        }
      }
    }
  }
  // The run exercised partial and full matches, not only zeros.
  assert.ok(partial > 100 && full > 100, `partial ${partial}, full ${full}`);
});

test('prefix-cache-scorer handles a candidate list longer than any before it', () => {
  const s = makePlugin('scorer', 'prefix-cache-scorer', { hashBlockSize: 8 });
  const text = 'x'.repeat(40);
  const many = Array.from({ length: 300 }, (_, i) => backendView(`b${i}`, i));
  s.onDispatch!(requestInfo('1', text), many[299]!, 0);
  assert.deepEqual(scoresOf(s, requestInfo('2', text), many.slice(298)), [0, 1]);
  const got = scoresOf(s, requestInfo('3', text), many);
  assert.equal(got[299], 1);
  assert.ok(got.slice(0, 299).every((x) => x === 0));
});
