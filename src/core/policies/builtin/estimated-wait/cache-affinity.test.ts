import { test } from 'node:test';
import assert from 'node:assert/strict';
import { estimatedWait } from './policy.js';
import type { BackendView, EngineMetrics, RequestInfo } from '../../../types.js';
import { backendView, distinctText, engineReport, requestInfo, warmRates, chosen } from '../../../testing.js';

const text = distinctText;
const req = (id: string, promptText: string): RequestInfo => requestInfo(id, promptText, { api: 'openai' });
const metrics = (running: number, waiting: number): EngineMetrics => ({
  running,
  waiting,
  kvUsage: 0.5,
  at: 0,
});
const view = (name: string, index: number, over: Partial<BackendView> = {}): BackendView =>
  backendView(name, index, { api: 'openai', ...over });
const report = engineReport;

/**
 * Backend b holds an 8,000-character document (~2,000 tokens: ~2 s of prefill anywhere else) and
 * is full (its engine has requests waiting, four of ours running); a is idle. Returns the pick for
 * a request that re-reads the document.
 */
function reRead(params: Record<string, unknown>): string | undefined {
  const p = estimatedWait({ random: () => 0, params });
  let a = view('a', 0);
  let b = view('b', 1);
  let t = warmRates(p, [a, b]);
  const doc = text('document', 8000);
  const first = req('first', `${doc} first question?`);
  p.onDispatch?.(first, b, t);
  const rep = report(t, 2000, 2000, 50);
  p.onComplete?.(first, b, rep, rep.finishedAt);
  t += 10_000;
  for (let i = 0; i < 4; i++) p.onDispatch?.(req(`busy${i}`, text(`busy-${i}`, 400)), b, t);
  b = view('b', 1, { inFlight: 4, metrics: metrics(4, 2) });
  a = view('a', 0, { metrics: metrics(0, 0) });
  return chosen(p.pick(req('again', `${doc} another question?`), [a, b], t + 100))?.name;
}

test('estimated-wait queues a request for the full engine that holds its prefix when that is cheaper', () => {
  // Its wait inside b (a slot frees in about a second) plus the few new tokens beats ~2 s of prefill on a.
  assert.equal(reRead({}), 'b');
  // Plain late binding: only an engine with room now is a candidate, whatever it costs there.
  assert.equal(reRead({ queueForCache: false }), 'a');
  // No credit, no affinity: b looks like any full engine.
  assert.equal(reRead({ prefixCredit: 0 }), 'a');
});

test('estimated-wait learns how much its engine caches from the cached tokens it reports', () => {
  const run = (cachedShare: number | undefined, rounds: number): number => {
    const p = estimatedWait({ random: () => 0, params: { prefixCacheTokens: 100_000 } });
    const b = view('b', 0);
    const doc = text('doc', 8000);
    let t = 0;
    for (let i = 0; i < rounds; i++) {
      const r = req(`r${i}`, `${doc} question ${i}?`);
      p.onDispatch?.(r, b, t);
      // The first read is cold on any engine.
      const cached = cachedShare === undefined ? undefined : i === 0 ? 0 : Math.round(2000 * cachedShare);
      const rep = report(t, 2000, 2000 - (cached ?? 0), 20, cached);
      p.onComplete?.(r, b, rep, rep.finishedAt);
      t += 10_000;
    }
    const d = p.describe?.('b') ?? {};
    const v = d.prefixCacheTokens;
    assert.ok(v !== undefined && Number.isFinite(v) && v > 0, `prefixCacheTokens ${String(v)}`);
    return v;
  };
  // Engines that do not say keep the configured size.
  assert.equal(run(undefined, 20), 100_000);
  // The credit counted on the document each time, the engine had none of it: it keeps less.
  const shrunk = run(0, 150);
  assert.ok(shrunk < 10_000, `shrunk to ${shrunk}`);
  // It had it as predicted: no change.
  assert.equal(run(1, 20), 100_000);
});

test('estimated-wait: an engine that keeps more than the router remembers grows the credit', () => {
  // 2 chunks remembered at first (128 characters of the 8,000): the engine reports the whole
  // document cached, so the router learns to remember more.
  const p = estimatedWait({ random: () => 0, params: { prefixCacheTokens: 32 } });
  const b = view('b', 0);
  const doc = text('doc', 8000);
  let t = 0;
  for (let i = 0; i < 30; i++) {
    const r = req(`r${i}`, `${doc} question ${i}?`);
    p.onDispatch?.(r, b, t);
    const rep = report(t, 2000, 100, 20, i === 0 ? 0 : 1900);
    p.onComplete?.(r, b, rep, rep.finishedAt);
    t += 10_000;
  }
  const d = p.describe?.('b') ?? {};
  assert.ok((d.prefixCacheTokens ?? 0) > 2000, `learned ${String(d.prefixCacheTokens)}`);
  assert.ok((d.prefixChunks ?? 0) > 100, `remembers ${String(d.prefixChunks)} chunks`);
});

/**
 * Near saturation: b holds an 8,000-character document, a has room, b and c each run four requests
 * of 4,000 characters and have `queued` more waiting inside. Returns the pick for a re-read.
 */
function reReadSaturated(params: Record<string, unknown>, queued: number): string | undefined {
  const p = estimatedWait({ random: () => 0, params });
  let a = view('a', 0);
  let b = view('b', 1);
  let c = view('c', 2);
  let t = warmRates(p, [a, b, c]);
  const doc = text('document', 8000);
  const first = req('first', `${doc} first question?`);
  p.onDispatch?.(first, b, t);
  const rep = report(t, 2000, 2000, 50);
  p.onComplete?.(first, b, rep, rep.finishedAt);
  t += 10_000;
  for (let i = 0; i < 4 + queued; i++) {
    p.onDispatch?.(req(`b${i}`, text(`b-${i}`, 4000)), b, t);
    p.onDispatch?.(req(`c${i}`, text(`c-${i}`, 4000)), c, t);
  }
  a = view('a', 0, { metrics: metrics(0, 0) });
  b = view('b', 1, { inFlight: 4 + queued, metrics: metrics(4, queued) });
  c = view('c', 2, { inFlight: 4 + queued, metrics: metrics(4, queued) });
  return chosen(p.pick(req('again', `${doc} another question?`), [a, b, c], t + 100))?.name;
}

test('estimated-wait: the deeper the fleet queues, the more a lost hit costs (missQueueWeight)', () => {
  // Twelve waiting inside b: its wait there outweighs a miss priced once (missWeight alone)…
  // (tieByCache off: b's cost then ties a's, and a tie goes to the holder.)
  assert.equal(reReadSaturated({ missQueueWeight: 0, tieByCache: false }, 12), 'a');
  // …not a miss priced at the queue it adds to: the request queues for its prefix.
  assert.equal(reReadSaturated({ tieByCache: false }, 12), 'b');
  assert.equal(reReadSaturated({}, 12), 'b');
});

test('estimated-wait: a prompt the learned record forgot still leans to where it was sent (affinityMemory)', () => {
  const pick = (params: Record<string, unknown>): string | undefined => {
    // A record of 4,000 tokens (250 chunks): three 8,000-character prompts later, the document is
    // gone from it, not from the four times longer affinity memory.
    const p = estimatedWait({ random: () => 0, params: { prefixCacheTokens: 4000, ...params } });
    const a = view('a', 0);
    const b = view('b', 1);
    let t = warmRates(p, [a, b]);
    const doc = text('document', 8000);
    // Prompts that share a first chunk, so each is recorded (a prompt whose first chunk no other
    // shares is kept unhashed until one does, and recorded then).
    const sys = text('system', 64);
    for (const [id, prompt] of [
      ['first', `${doc} first question?`],
      ['second', `${doc} second question?`],
      ['x', `${sys}${text('other-x', 8000)}`],
      ['y', `${sys}${text('other-y', 8000)}`],
      ['z', `${sys}${text('other-z', 8000)}`],
    ] as const) {
      const r = req(id, prompt);
      p.onDispatch?.(r, b, t);
      const rep = report(t, 2000, 2000, 50);
      p.onComplete?.(r, b, rep, rep.finishedAt);
      t += 10_000;
    }
    return chosen(p.pick(req('again', `${doc} another question?`), [a, b], t))?.name;
  };
  assert.equal(pick({}), 'b');
  // Without it both look cold: the tie goes round-robin, after b.
  assert.equal(pick({ affinityMemory: 0 }), 'a');
});
