import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PrefixCredit } from './prefix-credit.js';
import { createRng } from '../../rng.js';
import { estimatedWait } from '../builtin/estimated-wait/index.js';
import type { BackendView, RequestInfo } from '../../types.js';
import { backendView, distinctText, engineReport, requestInfo, warmRates, chosen } from '../../testing.js';

const text = distinctText;

test('prefix credit: the longest prefix sent to each backend, in whole chunks', () => {
  const c = new PrefixCredit({ chunkChars: 64, capacityChunks: 100, maxPrefixChars: 32_768 });
  const turn1 = text('conv', 640); // 10 chunks
  const turn2 = `${turn1}${text('more', 300)}`; // shares turn1's 10 chunks, then 4 more (and 44 chars)
  c.record('t1', 'a', turn1);
  const k2 = c.keysOf('t2', turn2);
  assert.equal(k2.length, 14);
  assert.equal(c.cachedChars('a', k2), 640);
  assert.equal(c.cachedChars('b', k2), 0, 'never sent to b');
  // A prompt that diverges inside chunk 3 shares chunks 0–2 only.
  const forked = `${turn1.slice(0, 200)}#${turn1.slice(201)}`;
  assert.equal(c.cachedChars('a', c.keysOf('f', forked)), 192);
  c.record('t2', 'a', turn2);
  assert.equal(c.cachedChars('a', k2), 14 * 64);
  c.removeBackend('a');
  assert.equal(c.cachedChars('a', k2), 0);
});

test('prefix credit: a prompt is hashed once, and past its first chunk only if another shares it', () => {
  const c = new PrefixCredit({ chunkChars: 64, capacityChunks: 100, maxPrefixChars: 32_768 });
  const t = text('q', 500);
  assert.equal(c.keysOf('r0', t).length, 0, 'no prompt sent began like it: nothing to match');
  c.record('r0', 'a', t); // kept unhashed until a later prompt shares its first chunk
  assert.equal(c.sizeOf('a'), 0);
  const k = c.keysOf('r1', t);
  assert.equal(k.length, 7, 'a prompt with the same head: hashed, and the first one recorded');
  assert.equal(c.sizeOf('a'), 7);
  assert.equal(c.keysOf('r1', t), k, 'the same keys object: not hashed again');
  c.record('r1', 'b', t);
  assert.notEqual(c.keysOf('r1', t), k, 'dispatched: the memo is dropped');
  assert.equal(c.cachedChars('b', k), 7 * 64);
  assert.equal(c.keysOf('o', text('other', 640)).length, 0, 'an unrelated prompt');
  // A kept prompt leaves with its backend.
  c.record('u', 'x', text('u', 640));
  c.removeBackend('x');
  assert.equal(c.keysOf('u2', text('u', 640)).length, 0);
});

test('prefix credit: bounded per backend, least recently sent first, a chain from its tail', () => {
  // Capacity 12: two generations of 6 chunks. Every prompt here begins with the same chunk (a
  // system prompt), so each is recorded when it is sent.
  const c = new PrefixCredit({ chunkChars: 64, capacityChunks: 12, maxPrefixChars: 32_768 });
  const sys = text('system', 64);
  c.record('0', 'y', sys);
  const a = sys + text('a', 576); // 10 chunks: its first 6 (a generation) are kept
  const b = sys + text('b', 320); // 6 chunks
  const d = sys + text('d', 320);
  c.record('1', 'x', a);
  assert.equal(
    c.cachedChars('x', c.keysOf('2', a)),
    6 * 64,
    'a chain longer than a generation keeps its head',
  );
  c.record('3', 'x', b);
  assert.equal(c.sizeOf('x') <= 12, true, 'never more than the capacity');
  assert.equal(c.cachedChars('x', c.keysOf('4', a)), 6 * 64);
  assert.equal(c.cachedChars('x', c.keysOf('5', b)), 6 * 64);
  // A follow-up of a touches a's head again; then d fills a generation: b, sent before, goes.
  c.record('6', 'x', `${a.slice(0, 128)}!`); // a's first 2 chunks
  c.record('7', 'x', d);
  assert.equal(c.sizeOf('x') <= 12, true);
  assert.equal(c.cachedChars('x', c.keysOf('8', b)), 64, 'least recently sent: only the shared head is left');
  assert.equal(c.cachedChars('x', c.keysOf('9', d)), 6 * 64);
  // a's tail went with b's generation, its recently touched head stayed: still a prefix.
  assert.equal(c.cachedChars('x', c.keysOf('10', a)), 2 * 64);
});

const view = (name: string, index: number): BackendView => backendView(name, index, { inFlight: 0 });
const req = (id: string, promptText: string): RequestInfo => requestInfo(id, promptText);
const report = engineReport;

/**
 * Two identical idle backends; `b` served the conversation's first turn. The second turn resends it
 * (8,000 characters, ~2,000 tokens) plus 400 new characters: ~2 s of prefill anywhere else, ~0.1 s
 * on b. Returns the pick for the second turn.
 */
function secondTurn(params: Record<string, unknown>): string | undefined {
  const p = estimatedWait({ random: () => 0, params });
  const a = view('a', 0);
  const b = view('b', 1);
  // Same rates on both (a few answers each, different prompts: nothing shared).
  let t = warmRates(p, [a, b]);
  const turn1 = req('turn1', text('conversation', 8000));
  p.onDispatch?.(turn1, b, t);
  const rep = report(t, 2000, 2000, 50);
  p.onComplete?.(turn1, b, rep, rep.finishedAt);
  t += 10_000;
  return chosen(p.pick(req('turn2', `${turn1.promptText}\n${text('follow-up', 399)}`), [a, b], t))?.name;
}

test('estimated-wait with prefix credit: the backend holding the prefix wins over an equal idle one', () => {
  // Without credit both are charged the whole prompt: a tie, which round-robin order gives to a.
  assert.equal(secondTurn({ prefixCredit: 0 }), 'a');
  // With it (the default), b is charged only the new part.
  assert.equal(secondTurn({}), 'b');
  assert.equal(secondTurn({ prefixCredit: 1 }), 'b');
  // Forgotten when the backend leaves: a tie again.
  const p = estimatedWait({ random: () => 0, params: { prefixCredit: 1 } });
  const b = view('b', 1);
  const turn1 = req('turn1', text('conversation', 8000));
  p.onDispatch?.(turn1, b, 0);
  p.onBackendRemoved?.('b');
  assert.equal(chosen(p.pick(req('turn2', `${turn1.promptText}!`), [view('a', 0), b], 1))?.name, 'a');
});

test('estimated-wait with prefix credit: a backend that remembers too little gets too little credit', () => {
  // 2 chunks remembered per backend (128 characters of the 8,400): within the tie tolerance, so the
  // tie-break decides: fewer in flight and round-robin order give it to a (tieByCache off)...
  assert.equal(secondTurn({ prefixCredit: 1, prefixCacheChunks: 2, tieByCache: false }), 'a');
  // ...and the default's cache-first tie-break to b, which holds those 128 characters.
  assert.equal(secondTurn({ prefixCredit: 1, prefixCacheChunks: 2 }), 'b');
  // 32 (two generations of 16 chunks: 1,024 characters): b's prefill is an eighth shorter, enough to win.
  assert.equal(secondTurn({ prefixCredit: 1, prefixCacheChunks: 32 }), 'b');
});

test('prefix credit: a long prompt is recorded sparsely past its first 128 chunks, and re-sending it adds only what is new', () => {
  const c = new PrefixCredit({ chunkChars: 64, capacityChunks: 100_000, maxPrefixChars: 1 << 20 });
  const doc = text('long-document', 64 * 1000); // 1,000 chunks
  c.record('d1', 'a', `${doc}${text('q1', 64)}`);
  c.keysOf('d2', `${doc}${text('q2', 64)}`); // (hashed in full once a second prompt shares the head)
  c.record('d2', 'a', `${doc}${text('q2', 64)}`);
  // 128 dense + every 16th of the rest + the last: ~184 entries for 1,001 chunks, not 1,001.
  const first = c.sizeOf('a');
  assert.ok(first > 128 && first < 200, `recorded ${first}`);
  // A third question: one new chunk (the last), the rest found at once.
  c.record('d3', 'a', `${doc}${text('q3', 64)}`);
  assert.equal(c.sizeOf('a'), first + 1);
  // The credit is exact over the dense head and to 16 chunks beyond.
  const k = c.keysOf('d4', `${doc.slice(0, 64 * 700)}#${text('fork', 640)}`);
  const cached = c.cachedChars('a', k);
  assert.ok(cached <= 700 * 64 && cached > (700 - 16) * 64, `credited ${cached} of ${700 * 64}`);
  const head = c.keysOf('d5', `${doc.slice(0, 64 * 100)}#${text('fork2', 640)}`);
  assert.equal(c.cachedChars('a', head), 100 * 64);
});

test('prefix credit: a backend record takes at most 40 bytes per key remembered (and per key of the longest prompt), however many prompts pass', () => {
  // Capacity 2,000 chunks: generations of 1,000; 300 prompts of 20 chunks (6,000 distinct chunks).
  const c = new PrefixCredit({ chunkChars: 64, capacityChunks: 2000, maxPrefixChars: 32_768 });
  const sys = text('system', 64);
  c.record('s', 'a', sys);
  let most = 0;
  for (let i = 0; i < 300; i++) {
    c.record(`p${i}`, 'a', sys + text(`prompt ${i}`, 64 * 19));
    assert.ok(c.sizeOf('a') <= 2000);
    c.maintain('a');
    most = Math.max(most, c.bytesOf('a'));
  }
  assert.ok(most <= 40 * (2000 + 20), `${most} bytes`);
  // Forgotten keys were dropped: 6,000 keys would have needed 12,000 eight-byte slots.
  assert.ok(c.bytesOf('a') <= 40 * (2000 + 20) && c.bytesOf('a') < 12_000 * 8);
  assert.equal(c.bytesOf('never'), 0);
});

test('prefix credit: two records sharing their tables answer exactly as two apart would', () => {
  // The learned record (small, its size changing) and a longer one, as the estimated-wait policy
  // keeps them; the same traffic to each pair, the longer one given the first one's keys.
  const opts = { chunkChars: 64, maxPrefixChars: 32_768 };
  const a0 = new PrefixCredit({ ...opts, capacityChunks: 40 });
  const a1 = new PrefixCredit({ ...opts, capacityChunks: 160 });
  const s0 = new PrefixCredit({ ...opts, capacityChunks: 40 });
  const s1 = new PrefixCredit({ ...opts, capacityChunks: 160, shareTablesWith: s0 });
  const rnd = createRng(11);
  const docs = Array.from({ length: 12 }, (_, i) => text(`doc ${i}`, 64 * (4 + Math.floor(rnd() * 60))));
  const backends = ['a', 'b', 'c'];
  for (let i = 0; i < 3000; i++) {
    const be = backends[Math.floor(rnd() * 3)]!;
    const d = docs[Math.floor(rnd() ** 2 * docs.length)]!;
    const prompt = d.slice(0, 64 * Math.floor(1 + rnd() * (d.length / 64))) + text(`q${i}`, 64 * 3);
    const id = String(i);
    const k0 = a0.keysOf(id, prompt);
    const k1 = s0.keysOf(id, prompt);
    for (const b of backends) {
      assert.equal(s0.cachedChars(b, k1), a0.cachedChars(b, k0), `learned, ${b} at ${i}`);
      assert.equal(s1.cachedChars(b, k1), a1.cachedChars(b, k0), `longer, ${b} at ${i}`);
    }
    if (i % 97 === 0) {
      const cap = 2 + Math.floor(rnd() * 80);
      a0.setCapacity(be, cap);
      s0.setCapacity(be, cap);
    }
    a0.record(id, be, prompt);
    a1.record(id, be, prompt, k0);
    s0.record(id, be, prompt);
    s1.record(id, be, prompt, k1);
    if (i % 5 === 0) s0.maintain(be);
    if (i % 701 === 0) {
      const gone = backends[i % 3]!;
      for (const c of [a0, a1, s0, s1]) c.removeBackend(gone);
    }
    for (const b of backends) {
      assert.equal(s0.sizeOf(b), a0.sizeOf(b));
      assert.equal(s1.sizeOf(b), a1.sizeOf(b));
    }
  }
  assert.ok(a0.sizeOf('a') > 0 && a1.sizeOf('a') > a0.sizeOf('a'));
});
