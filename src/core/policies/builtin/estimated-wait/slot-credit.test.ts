import { test } from 'node:test';
import assert from 'node:assert/strict';
import { estimatedWait } from './policy.js';
import type { EngineMetrics, RequestInfo } from '../../../types.js';
import { backendView, distinctText, engineReport, requestInfo, warmRates, chosen } from '../../../testing.js';

const req = (id: string, promptText: string): RequestInfo => requestInfo(id, promptText, { api: 'openai' });

/** Engine metrics; `slots`: the engine says its cache is that many slots of 4,000 tokens (llama.cpp's /props). */
const metrics = (running: number, slots: number | undefined): EngineMetrics => ({
  running,
  waiting: 0,
  kvUsage: 0,
  at: 0,
  ...(slots !== undefined ? { cache: { tokens: slots * 4000, slots } } : {}),
});

/**
 * Engine a (2 slots) was sent three 8,000-character documents, one after another, then the first
 * again; b is idle and was sent nothing. Where does a re-read of `doc` go? `running`: a read of
 * the first document still runs on a.
 */
function pickFor(doc: 'first' | 'third', running: boolean, slots: number | undefined): string | undefined {
  const p = estimatedWait({ random: () => 0, params: {} });
  let a = backendView('a', 0, { api: 'openai', metrics: metrics(0, slots) });
  const b = backendView('b', 1, { api: 'openai', metrics: metrics(0, slots) });
  let t = warmRates(p, [a, b]);
  const docs = ['first', 'second', 'third'].map((d) => distinctText(d, 8000));
  docs.forEach((d, i) => {
    const r = req(`r${i}`, `${d} question ${i}?`);
    p.onDispatch?.(r, a, t);
    const rep = engineReport(t, 2000, 2000, 10);
    p.onComplete?.(r, a, rep, rep.finishedAt);
    t += 10_000;
  });
  if (running) {
    p.onDispatch?.(req('run', `${docs[2]!} still running?`), a, t);
    a = backendView('a', 0, { api: 'openai', inFlight: 1, metrics: metrics(1, slots) });
  }
  const text = doc === 'first' ? docs[0]! : docs[2]!;
  return chosen(p.pick(req('again', `${text} again?`), [a, b], t + 100))?.name;
}

test('estimated-wait on slot caches: a document the slots evicted is not credited', () => {
  // The record (1M tokens) remembers all three documents on a.
  assert.equal(pickFor('first', false, undefined), 'a');
  // Two slots kept the second and third: the first is prefilled whole on either engine; b is as good.
  assert.notEqual(pickFor('first', false, 2), pickFor('first', false, undefined));
  // The third is still there.
  assert.equal(pickFor('third', false, 2), 'a');
});

test('estimated-wait on slot caches: nothing is credited beside a running read of the same document', () => {
  // A paged cache shares the running read's blocks: a is worth its small wait.
  assert.equal(pickFor('third', true, undefined), 'a');
  // A free slot on a holds the second document, not the third: b, idle, prefills it sooner.
  assert.equal(pickFor('third', true, 2), 'b');
});

/**
 * Engine a (2 slots, idle) holds two documents, 'first' (the older) and 'second'; b (2 slots) runs a
 * read of `bRuns` (the first document, or a short prompt) in one slot, the other empty. Where does
 * a new document go?
 */
function newDocTo(bRuns: 'first' | 'short', slotEvictWeight: number): string | undefined {
  const p = estimatedWait({ random: () => 0, params: { slotEvictWeight } });
  const a = backendView('a', 0, { api: 'openai', metrics: metrics(0, 2) });
  let b = backendView('b', 1, { api: 'openai', metrics: metrics(0, 2) });
  let t = warmRates(p, [a, b]);
  const [first, second, fourth] = ['first', 'second', 'fourth'].map((d) => distinctText(d, 8000));
  [first, second].forEach((d, i) => {
    const r = req(`r${i}`, `${d!} question ${i}?`);
    p.onDispatch?.(r, a, t);
    const rep = engineReport(t, 2000, 2000, 10);
    p.onComplete?.(r, a, rep, rep.finishedAt);
    t += 10_000;
  });
  p.onDispatch?.(req('run', bRuns === 'first' ? `${first!} running?` : 'a short question?'), b, t);
  b = backendView('b', 1, { api: 'openai', inFlight: 1, metrics: metrics(1, 2) });
  return chosen(p.pick(req('new', `${fourth!} question?`), [a, b], t + 100))?.name;
}

test('estimated-wait on slot caches: a new document does not evict the only copy of another', () => {
  // Unpriced, idle a wins: its slot holding 'first' is lost, and 'first' is held nowhere else.
  assert.equal(newDocTo('short', 0), 'a');
  // Priced (the default), b's empty slot loses nothing.
  assert.equal(newDocTo('short', 1), 'b');
  // b runs 'first' too: a's copy is not the only one, evicting it costs nothing, and idle a wins.
  assert.equal(newDocTo('first', 1), 'a');
});
