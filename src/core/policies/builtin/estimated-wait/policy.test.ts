// The estimated-wait policy as a whole (pick, late binding, ties, learning, through the scheduler);
// over 500 lines because each test drives the full policy. Its parts are tested alone beside it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { estimatedWait } from './index.js';
import { Scheduler } from '../../../scheduler.js';
import { createPolicy } from '../../index.js';
import type { BackendView, Policy, RequestInfo, ResponseRatioOrder } from '../../../types.js';
import { backendView, chosen } from '../../../testing.js';

const view = (name: string, index: number, inFlight = 0): BackendView =>
  backendView(name, index, { inFlight });
const req = (id: string, chars = 400, maxTokens?: number): RequestInfo => ({
  id,
  model: 'm',
  api: 'ollama',
  arrivedAt: 0,
  // Distinct per request (its id first): equal prompts would share a cached prefix (prefixCredit).
  promptText: `${id}:`.padEnd(chars, 'x').slice(0, chars),
  maxTokens,
});

/** Teach the policy a backend's engine rates with one answered request. */
function teach(
  p: Policy,
  b: BackendView,
  id: string,
  prefillMsPerTok: number,
  decodeMsPerTok: number,
  now: number,
): void {
  const r = req(id);
  p.onDispatch?.(r, b, now);
  const promptEvalMs = 100 * prefillMsPerTok;
  const evalMs = 100 * decodeMsPerTok;
  p.onComplete?.(
    r,
    b,
    {
      ok: true,
      dispatchedAt: now,
      finishedAt: now + promptEvalMs + evalMs,
      promptTokens: 100,
      completionTokens: 100,
      promptEvalMs,
      evalMs,
    },
    now + promptEvalMs + evalMs,
  );
}

/** A policy that has learned two backends' rates: `a` at 1 ms/token prefill and `aDecode`, `b` at `bPrefill`/`bDecode`. */
function taughtPair(
  params: Record<string, unknown>,
  aDecode: number,
  bPrefill: number,
  bDecode: number,
): { p: ReturnType<typeof estimatedWait>; a: BackendView; b: BackendView } {
  const p = estimatedWait({ random: () => 0, params });
  const a = view('a', 0);
  const b = view('b', 1);
  teach(p, a, 't1', 1, aDecode, 0);
  teach(p, b, 't2', bPrefill, bDecode, 0);
  return { p, a, b };
}

test('learns engine rates and prefers the faster backend', () => {
  const p = estimatedWait({ random: () => 0, params: {} });
  const fast = view('fast', 0);
  const slow = view('slow', 1);
  teach(p, fast, 't1', 1, 10, 0);
  teach(p, slow, 't2', 10, 100, 0);
  assert.equal(p.describe!('fast').decodeSPerToken, 0.01);
  assert.equal(chosen(p.pick(req('r'), [fast, slow], 5000))?.name, 'fast');
});

test('a busy fast backend loses to an idle slow one once its queue outweighs the speed gap', () => {
  const p = estimatedWait({ random: () => 0, params: { defaultSlots: 1 } });
  const fast = view('fast', 0);
  const slow = view('slow', 1);
  teach(p, fast, 't1', 1, 10, 0);
  teach(p, slow, 't2', 2, 20, 0);
  // Load the fast one with 3 long requests in flight (each ~1.1 s of work there).
  for (let i = 0; i < 3; i++) {
    const r = req(`f${i}`);
    p.onDispatch?.(r, view('fast', 0, i), 10_000);
  }
  assert.equal(chosen(p.pick(req('n'), [view('fast', 0, 3), slow], 10_000))?.name, 'slow');
});

test('backends that run several sequences at once are not charged a queue below their slots', () => {
  // The request's own finish only: the delay it adds to a's three is the next test's subject (and
  // the first token, which waits behind their prefill on a, ttft.test.ts's).
  const { p, b } = taughtPair({ defaultSlots: 4, othersWeight: 0, ttftWeight: 0 }, 10, 1, 12);
  for (let i = 0; i < 3; i++) p.onDispatch?.(req(`a${i}`), view('a', 0, i), 1000);
  // a has 3 in flight but 4 slots: the new request starts at once there, and a is faster.
  assert.equal(chosen(p.pick(req('n'), [view('a', 0, 3), b], 1000))?.name, 'a');
});

test('issue #20: a pick is priced with the stall it adds to the batch it joins', () => {
  const { p, b } = taughtPair({ defaultSlots: 4 }, 10, 1, 12);
  for (let i = 0; i < 3; i++) p.onDispatch?.(req(`a${i}`), view('a', 0, i), 1000);
  // Same as above, but its 0.1 s prefill would stall a's three (0.3 s): more than b is slower.
  assert.equal(chosen(p.pick(req('n'), [view('a', 0, 3), b], 1000))?.name, 'b');
});

test('no winner-takes-all: an unmeasured or stale idle backend is tried', () => {
  const p = estimatedWait({ random: () => 0, params: { exploreAfterDecisions: 2 } });
  const a = view('a', 0);
  const b = view('b', 1);
  teach(p, a, 't1', 1, 10, 0);
  // b has never answered: costed with the best rates, it ties with a and wins on round-robin.
  assert.equal(chosen(p.pick(req('x'), [a, b], 10))?.name, 'b');
  teach(p, b, 't2', 5, 50, 100);
  assert.equal(chosen(p.pick(req('y'), [a, b], 200))?.name, 'a');
  assert.equal(chosen(p.pick(req('y2'), [a, b], 300))?.name, 'a');
  // Pushed there (the round-robin cursor moves at the push, not the pick), and failed: nothing learned.
  p.onDispatch?.(req('y2'), a, 300);
  p.onComplete?.(req('y2'), a, { ok: false, dispatchedAt: 300, finishedAt: 301 }, 301);
  // two decisions later, b's estimate is stale and b is idle → it is re-measured
  assert.equal(chosen(p.pick(req('z'), [view('a', 0), b], 400))?.name, 'b');
});

test('predicted output length follows observed answers and the client cap', () => {
  const p = estimatedWait({ random: () => 0, params: { defaultOutputTokens: 10 } });
  const a = view('a', 0);
  for (let i = 0; i < 30; i++) teach(p, a, `t${i}`, 1, 10, i * 10_000);
  const d = p.describe!('a');
  assert.ok((d.slots ?? 0) >= 1);
  const r = req('capped', 400, 5);
  p.onDispatch?.(r, a, 400_000);
  // pending work for a capped request: at most 5 tokens of decode + prefill
  assert.ok(p.describe!('a').pendingWorkS! <= 0.1 * 1 + 5 * 0.01 + 1e-9);
});

/** Dispatch and complete one request on `b` as a batching engine reports it, `batch` running. */
function batchSample(
  p: Policy,
  b: BackendView,
  id: string,
  batch: number,
  msPerToken: (batch: number) => number,
  now: number,
): void {
  // `batch - 1` others in flight for the whole life of this one, so its mean batch is `batch`.
  const others = Array.from({ length: batch - 1 }, (_, i) => req(`${id}-o${i}`));
  for (const [i, o] of others.entries()) p.onDispatch?.(o, view(b.name, b.index, i), now);
  const r = req(id);
  p.onDispatch?.(r, view(b.name, b.index, batch - 1), now);
  const evalMs = 100 * msPerToken(batch);
  const end = now + 10 + evalMs;
  const report = { ok: true, dispatchedAt: now, promptTokens: 100, completionTokens: 100 };
  p.onComplete?.(
    r,
    view(b.name, b.index, batch - 1),
    { ...report, finishedAt: end, promptEvalMs: 10, evalMs },
    end,
  );
  for (const o of others)
    p.onComplete?.(o, view(b.name, b.index, 0), { ok: false, dispatchedAt: now, finishedAt: end }, end);
}

test('issue #20: a batching backend is costed at the batch the request joins, not at a queue', () => {
  const p = estimatedWait({ random: () => 0, params: {} });
  const a = view('a', 0);
  // A batching engine: each sequence in the batch adds 1 ms to every token's step (10 ms alone).
  const step = (n: number): number => 10 + (n - 1);
  for (let i = 0; i < 40; i++) batchSample(p, a, `s${i}`, 1 + (i % 12), step, i * 10_000);
  const d = p.describe!('a');
  assert.ok(Math.abs(d.decodeSlopeSPerSeq! - 0.001) < 2e-4, JSON.stringify(d));
  assert.ok(d.slots! >= 12);
  // 20 in flight: above every count seen, yet no queue is charged — only the slower step.
  for (let i = 0; i < 20; i++) p.onDispatch?.(req(`f${i}`), view('a', 0, i), 500_000);
  const out = new Float64Array(1);
  p.estimates(req('n'), [view('a', 0, 20)], 500_000, out);
  const service = 0.1 /* prefill */ + 100 * 0.001 * step(21);
  assert.ok(Math.abs(out[0]! - service) / service < 0.15, `estimate ${out[0]} vs ${service}`);
});

test('issue #20: identical replicas whose fits differ only by noise split load by in-flight count', () => {
  const p = estimatedWait({ random: () => 0, params: {} });
  const bs = [view('a', 0), view('b', 1)];
  // Same engine, noisy samples: a looks 2 % faster by chance.
  for (let i = 0; i < 30; i++) {
    const noise = i % 2 === 0 ? 1.1 : 0.9;
    batchSample(p, bs[0]!, `a${i}`, 1 + (i % 6), (n) => (10 + n) * noise * 0.98, i * 10_000);
    batchSample(p, bs[1]!, `b${i}`, 1 + (i % 6), (n) => (10 + n) * noise, i * 10_000);
  }
  for (let i = 0; i < 3; i++) p.onDispatch?.(req(`x${i}`), view('a', 0, i), 400_000);
  // a is "faster" but has 3 in flight to b's none: within noise, the lighter one wins.
  assert.equal(chosen(p.pick(req('n'), [view('a', 0, 3), view('b', 1, 0)], 400_000))?.name, 'b');
});

test('issue #20: a request pushed behind a long prefill is costed the rest of that prefill', () => {
  const { p, a } = taughtPair({}, 10, 1, 10);
  // a long prompt (40 000 chars ≈ 10 000 tokens ≈ 10 s of prefill) just went to a.
  p.onDispatch?.(req('long', 40_000), a, 10_000);
  const out = new Float64Array(2);
  p.estimates(req('n'), [view('a', 0, 1), view('b', 1, 0)], 10_500, out);
  assert.ok(out[0]! - out[1]! > 9, JSON.stringify([...out]));
});

test('engine metrics: requests waiting inside the engine mean a queue, whatever was learned', () => {
  const p = estimatedWait({ random: () => 0, params: {} });
  const a = view('a', 0);
  for (let i = 0; i < 20; i++) batchSample(p, a, `s${i}`, 1 + (i % 8), (n) => 10 + n, i * 10_000);
  for (let i = 0; i < 8; i++) p.onDispatch?.(req(`f${i}`), view('a', 0, i), 300_000);
  const out = new Float64Array(1);
  const metrics = (waiting: number) => ({ running: 8, waiting, kvUsage: 1, at: 300_000 });
  p.estimates(req('n'), [backendView('a', 0, { inFlight: 8, metrics: metrics(0) })], 300_000, out);
  const free = out[0]!;
  p.estimates(req('n'), [backendView('a', 0, { inFlight: 8, metrics: metrics(2) })], 300_000, out);
  assert.ok(out[0]! > free, `${out[0]} vs ${free}`);
});

/** Complete `r` on `b` after `out` generated tokens at 10 ms each (prefill 1 ms/token). */
function answer(p: Policy, b: BackendView, r: RequestInfo, out: number, now: number): void {
  p.onDispatch?.(r, b, now);
  const end = now + 100 + 10 * out;
  p.onComplete?.(
    r,
    b,
    {
      ok: true,
      dispatchedAt: now,
      finishedAt: end,
      promptTokens: 100,
      completionTokens: out,
      promptEvalMs: 100,
      evalMs: 10 * out,
    },
    end,
  );
}

test('issue #20: answers cut at the client cap are censored, and move the prediction to the cap', () => {
  const p = estimatedWait({ random: () => 0, params: { defaultOutputTokens: 10, lateBinding: false } });
  const a = view('a', 0);
  // A request pushed before any answer was seen, then clients' answers, each capped at the length
  // it wanted (Heimdall's workload.py): every one reaches its cap.
  p.onDispatch?.(req('big', 400, 1000), a, 0);
  for (let i = 0; i < 40; i++) answer(p, a, req(`c${i}`, 400, 500), 500, 0);
  // ~1000 tokens expected for the one in flight (the cap is reached), not min(default 10, cap):
  // ~10 s of work, 5.1 s done.
  const left = p.describe!('a').pendingWorkS!;
  assert.ok(left > 3, `pending ${left}`);
  // Uncapped answers still teach the natural length.
  const q = estimatedWait({ random: () => 0, params: { defaultOutputTokens: 10, lateBinding: false } });
  for (let i = 0; i < 40; i++) answer(q, a, req(`u${i}`), 300, i * 10_000);
  q.onDispatch?.(req('n'), a, 1_000_000);
  const w = q.describe!('a').pendingWorkS!;
  assert.ok(Math.abs(w - (0.1 + 300 * 0.01)) < 0.3, `pending ${w}`);
});

const engine = (name: string, index: number, waiting: number, over: Partial<BackendView> = {}) =>
  backendView(name, index, { metrics: { running: 4, waiting, kvUsage: 0.9, at: 0 }, ...over });

test('issue #20: late binding — held in the router while every engine would queue it', () => {
  const p = estimatedWait({ random: () => 0, params: {} });
  teach(p, view('a', 0), 't1', 1, 10, 0);
  teach(p, view('b', 1), 't2', 1, 10, 0);
  assert.equal(chosen(p.pick(req('r'), [engine('a', 0, 3), engine('b', 1, 1)], 1000)), undefined);
  // b's queue drained: r goes there, though a's estimate alone would not be worse.
  assert.equal(chosen(p.pick(req('r'), [engine('a', 0, 3), engine('b', 1, 0)], 1100))?.name, 'b');
  // What this router pushed since the read waits too (one beyond the batch seen is allowed).
  const since = { dispatchedSinceMetrics: 2 };
  assert.equal(
    chosen(p.pick(req('s'), [engine('a', 0, 0, since), engine('b', 1, 0, since)], 1200)),
    undefined,
  );
  // Without engine metrics: in flight beyond the one sequence known to run at once would wait.
  assert.equal(chosen(p.pick(req('u'), [view('a', 0, 5), view('b', 1, 9)], 1300)), undefined);
  assert.equal(chosen(p.pick(req('u'), [view('a', 0, 5), view('b', 1, 1)], 1300))?.name, 'b');
  const off = estimatedWait({ random: () => 0, params: { lateBinding: false } });
  assert.ok(off.pick(req('r'), [engine('a', 0, 3), engine('b', 1, 1)], 1000));
});

test('issue #20: late binding — the held request with the highest response ratio goes first', () => {
  const order = (params: Record<string, unknown>): string[] => {
    // The built-in as hosts create it (a profile around the policy), so the order must pass through.
    const p = createPolicy({ name: 'estimated-wait', params }, () => 0);
    teach(p, view('a', 0), 't1', 1, 10, 0);
    const s = new Scheduler({ policy: p });
    s.addBackend({ name: 'a', api: 'ollama', models: ['m'], maxConcurrency: Infinity, weight: 1 });
    // The engine queues requests inside: both are held in the router (on load: the second is not
    // even asked), the long one first.
    s.setMetrics('a', { running: 4, waiting: 2, kvUsage: 0.9, at: 0 });
    assert.deepEqual(s.submit({ ...req('long', 40_000), arrivedAt: 0 }, 9_000), []);
    assert.deepEqual(s.submit({ ...req('short', 40), arrivedAt: 9_000 }, 9_000), []);
    assert.equal(s.queueLength, 2);
    // Room frees at 10 s: the long one (waited 10 s for ~11 s of work) is first in arrival order,
    // the short one (waited 1 s for ~1 s of work) has the higher response ratio.
    s.setMetrics('a', { running: 4, waiting: 0, kvUsage: 0.9, at: 10_000 });
    return s.pump(10_000).map((d) => d.request.id);
  };
  assert.deepEqual(order({}), ['short', 'long']);
  assert.deepEqual(order({ heldOrder: 'fifo' }), ['long', 'short']);
});

test('issue #17: outputLength: learned predicts answer length from the prompt text, prior from its length alone', () => {
  // Same prompt length, two tasks: the text says which answers are long.
  const ask = (id: string, task: string): RequestInfo => ({
    ...req(id),
    promptText: `${'x'.repeat(380)} This is a ${task} task`,
  });
  const pending = (params: Record<string, unknown>): { short: number; long: number } => {
    // The prompts share 380 characters: no prefix credit, so only the predicted answers differ.
    const p = estimatedWait({ random: () => 0, params: { prefixCredit: 0, ...params } });
    const a = view('a', 0);
    let now = 0;
    for (let i = 0; i < 300; i++) {
      const long = i % 2 === 1;
      const r = ask(`t${i}`, long ? 'essay' : 'summary');
      const out = long ? 900 : 20;
      p.onDispatch?.(r, a, now);
      const report = { ok: true, dispatchedAt: now, promptTokens: 100, completionTokens: out };
      const end = now + 10 + out;
      p.onComplete?.(r, a, { ...report, finishedAt: end, promptEvalMs: 10, evalMs: out }, end);
      now = end + 1000;
    }
    const work = (task: string): number => {
      const r = ask(`q-${task}`, task);
      p.onDispatch?.(r, a, now);
      const w = p.describe!('a').pendingWorkS!;
      p.onComplete?.(r, a, { ok: false, dispatchedAt: now, finishedAt: now }, now);
      return w;
    };
    return { short: work('summary'), long: work('essay') };
  };
  const learned = pending({ outputLength: 'learned' });
  assert.ok(learned.long > 5 * learned.short, `learned: ${learned.long} vs ${learned.short}`);
  const prior = pending({});
  assert.equal(prior.long, prior.short);
});

test('response-ratio sizes: memoised per prompt length, yet always what a fresh policy computes', () => {
  // `warm` is asked for sizes after every event (its memo is filled and must be dropped as it
  // learns); a fresh policy fed the same history is asked once, at each check.
  const a = view('a', 0);
  const b = view('b', 1);
  // Prompt lengths far apart (one memo entry each, kept from one event to the next), and pairs of
  // the same length with other caps and models (one entry for both: each replaces the other).
  const asked: RequestInfo[] = [];
  for (const chars of [40, 400, 1200, 4000, 80_000])
    for (const max of [undefined, 0, 8, 300])
      asked.push(req(`s${chars}-${max}`, chars + 97 * (max ?? 1), max));
  for (const [model, max] of [
    ['m', 8],
    ['m', undefined],
    ['other', undefined],
  ] as const)
    asked.push({ ...req(`${model}-${max}`, 400, max), model });
  const sizes = (p: Policy): number[] => asked.map((r) => ratioOrder(p).size(r));
  const event = (p: Policy, i: number): void => {
    if (i === 12) return p.onBackendRemoved!('a');
    const r = req(`t${i}`, 100 + 300 * i, i % 3 === 0 ? 50 : undefined);
    p.onDispatch!(r, i % 2 ? a : b, i * 1000);
    p.onComplete!(
      r,
      i % 2 ? a : b,
      {
        ok: true,
        dispatchedAt: i * 1000,
        finishedAt: i * 1000 + 500,
        promptTokens: 25 + 75 * i,
        completionTokens: 20 + 17 * i,
        promptEvalMs: 50 + i,
        evalMs: 400 + 9 * i,
      },
      i * 1000 + 500,
    );
  };
  const warm = estimatedWait({ random: () => 0, params: {} });
  for (let i = 0; i <= 12; i++) {
    const before = sizes(warm);
    event(warm, i);
    const fresh = estimatedWait({ random: () => 0, params: {} });
    for (let j = 0; j <= i; j++) event(fresh, j);
    const after = sizes(warm);
    assert.deepEqual(after, sizes(fresh), `after event ${i}`);
    // All at once (as the scheduler sizes a held group), the same as one by one.
    const batch = new Float64Array(asked.length);
    const other = estimatedWait({ random: () => 0, params: {} });
    for (let j = 0; j <= i; j++) event(other, j);
    ratioOrder(other).sizes!(asked, batch);
    assert.deepEqual([...batch], after, `all at once after event ${i}`);
    if (i < 12) assert.notDeepEqual(after, before, `event ${i} changed what sizes depend on`);
  }
  // Same prompt length, different caps and models: different sizes (not one memo entry for all).
  const s = sizes(warm);
  const at = (id: string): number => s[asked.findIndex((r) => r.id === id)]!;
  assert.notEqual(at('m-undefined'), at('m-8'));
  assert.notEqual(at('m-undefined'), at('other-undefined'));
});

test('picks reuse what each backend’s flights add to an estimate, and cost exactly what a fresh policy does', () => {
  // Measured backends are costed at their own fits (no exploring), and every candidate is open:
  // the estimates then depend on the history and the instant alone, not on the count of decisions.
  const params = { exploreAfterDecisions: 1e9, lateBinding: false, defaultSlots: 4 };
  // a: full (its metrics say 2 run and 1 waits); b: full at 3 (its cap); c: batching, never full;
  // d: never measured, so costed at the fits of the backend best for each request (a or c).
  const a = backendView('a', 0, { metrics: { waiting: 1, running: 2, kvUsage: 0.5, at: 0 } });
  const b = backendView('b', 1, { maxConcurrency: 3 });
  const c = backendView('c', 2);
  const d = backendView('d', 3);
  const views = [a, b, c, d];
  const history: ((p: Policy) => void)[] = [
    (p) => teach(p, a, 'ta', 1, 10, 0),
    (p) => teach(p, b, 'tb', 2, 12, 0),
    (p) => teach(p, c, 'tc', 0.1, 16, 0),
  ];
  for (let i = 0; i < 12; i++) {
    const v = views[i % 4]!;
    const r = req(`f${i}`, 200 + 150 * i);
    history.push((p) => p.onDispatch!(r, v, 4000 + 100 * i));
  }
  const warm = estimatedWait({ random: () => 0, params });
  for (const h of history) h(warm);
  // [request, prompt characters, now, dispatched after its pick]; 'done': f5 (on b) completes,
  // 'failed': f9 (on b) fails (nothing learned, one flight less).
  const steps: [string, number, number, boolean][] = [
    ['q0', 300, 5000, true],
    ['q1', 9000, 5000, false],
    ['q2', 200, 5000, false],
    ['done', 0, 5000, false],
    ['q3', 9000, 5000, false],
    ['q4', 400, 5000, true],
    ['q5', 8000, 5020, false],
    ['failed', 0, 5020, false],
    ['q6', 8000, 5020, true],
    ['q7', 100, 5020, false],
  ];
  for (const [id, chars, now, dispatched] of steps) {
    if (id === 'done') {
      const done = (p: Policy): void =>
        p.onComplete!(
          req('f5', 950),
          b,
          {
            ok: true,
            dispatchedAt: 4500,
            finishedAt: now,
            promptTokens: 200,
            completionTokens: 90,
            promptEvalMs: 150,
            evalMs: 400,
          },
          now,
        );
      done(warm);
      history.push(done);
      continue;
    }
    if (id === 'failed') {
      const failed = (p: Policy): void =>
        p.onComplete!(req('f9', 1550), b, { ok: false, dispatchedAt: 4900, finishedAt: now }, now);
      failed(warm);
      history.push(failed);
      continue;
    }
    const r = req(id, chars);
    const to = chosen(warm.pick(r, views, now))!;
    const fresh = estimatedWait({ random: () => 0, params });
    for (const h of history) h(fresh);
    fresh.pick(r, views, now);
    assert.ok(warm.explainLast?.()?.scores.length === 4);
    assert.deepEqual(warm.explainLast?.()?.scores, fresh.explainLast?.()?.scores, `estimates for ${id}`);
    if (dispatched) {
      warm.onDispatch!(r, to, now);
      history.push((p) => p.onDispatch!(r, to, now));
    }
  }
});

test('a dispatch right after its pick records what the pick found; after learning in between, what is true then', () => {
  const a = view('a', 0);
  const b = view('b', 1);
  const history = (p: Policy): void => {
    teach(p, a, 't1', 1, 10, 0);
    teach(p, b, 't2', 2, 12, 0);
    p.onDispatch!(req('x', 700), a, 1000);
  };
  const r = req('r', 2000);
  const learnMore = (p: Policy): void =>
    p.onComplete!(
      req('x', 700),
      a,
      {
        ok: true,
        dispatchedAt: 1000,
        finishedAt: 3000,
        promptTokens: 500,
        completionTokens: 300,
        promptEvalMs: 900,
        evalMs: 1000,
      },
      3000,
    );
  for (const learnBetween of [false, true]) {
    const picked = estimatedWait({ random: () => 0, params: {} });
    const direct = estimatedWait({ random: () => 0, params: {} });
    history(picked);
    history(direct);
    const to = chosen(picked.pick(r, [a, b], 2000))!;
    direct.pick(req('other', 10), [a, b], 2000); // the same count of decisions
    if (learnBetween) {
      learnMore(picked);
      learnMore(direct);
    }
    picked.onDispatch!(r, to, 3000);
    direct.onDispatch!(r, to, 3000);
    assert.deepEqual(
      picked.describe!(to.name),
      direct.describe!(to.name),
      `learned in between: ${learnBetween}`,
    );
  }
});

test('issue #34: a non-streamed answer (wall time only) is split into prefill and decode, not booked as prefill', () => {
  const p = estimatedWait({ random: () => 0, params: {} });
  const b = view('oa', 0);
  // 1 prompt token, 223 output tokens in 4.04 s, no engine durations (OpenAI API), not streamed.
  for (let i = 0; i < 5; i++) {
    const r = req(`w${i}`, 4);
    const t0 = i * 10_000;
    p.onDispatch?.(r, b, t0);
    const report = {
      ok: true,
      dispatchedAt: t0,
      // Its first chunk came just before its end (a body in two chunks).
      firstByteAt: t0 + 4039,
      firstByteIsWholeAnswer: true,
      finishedAt: t0 + 4040,
      promptTokens: 1,
      completionTokens: 223,
    };
    p.onComplete?.(r, b, report, t0 + 4040);
  }
  const d = p.describe!('oa');
  assert.ok(d.prefillSPerToken! < 0.01, `prefill ${d.prefillSPerToken} s/token`);
  const decode = d.decodeSPerToken!;
  assert.ok(Math.abs(decode - 4.04 / 223) < 0.002, `decode ${decode} s/token`);
  for (const v of Object.values(d)) assert.ok(Number.isFinite(v));
});

test('issue #34: a non-streamed answer is split by the rates streams taught, scaled to its wall time', () => {
  const p = estimatedWait({ random: () => 0, params: {} });
  const b = view('oa', 0);
  // Streams teach 2 ms per prompt token and 20 ms per output token (wall clock, first byte = first token).
  for (let i = 0; i < 4; i++) {
    const r = req(`s${i}`, 400);
    const t0 = i * 10_000;
    p.onDispatch?.(r, b, t0);
    const report = {
      ok: true,
      dispatchedAt: t0,
      firstByteAt: t0 + 200,
      finishedAt: t0 + 200 + 99 * 20,
      promptTokens: 100,
      completionTokens: 100,
    };
    p.onComplete?.(r, b, report, report.finishedAt);
  }
  const before = p.describe!('oa');
  // Then whole answers 1.5× slower than that model says: both rates move up, in the same ratio.
  for (let i = 0; i < 40; i++) {
    const r = req(`n${i}`, 400);
    const t0 = 100_000 + i * 10_000;
    p.onDispatch?.(r, b, t0);
    const wall = 1.5 * (100 * before.prefillSPerToken! + 100 * before.decodeSPerToken!) * 1000;
    const report = {
      ok: true,
      dispatchedAt: t0,
      firstByteAt: t0 + wall,
      firstByteIsWholeAnswer: true,
      finishedAt: t0 + wall,
      promptTokens: 100,
      completionTokens: 100,
    };
    p.onComplete?.(r, b, report, report.finishedAt);
  }
  const after = p.describe!('oa');
  const kp = after.prefillSPerToken! / before.prefillSPerToken!;
  const kd = after.decodeSPerToken! / before.decodeSPerToken!;
  assert.ok(kp > 1.3 && kp < 1.6, `prefill ×${kp}`);
  assert.ok(kd > 1.3 && kd < 1.6, `decode ×${kd}`);
});

test('issue #34: whole answers alone, of varied sizes, teach a prefill : decode ratio far from the priors', () => {
  const p = estimatedWait({ random: () => 0, params: {} });
  const b = view('gpu', 0);
  // 0.05 ms per prompt token, 20 ms per output token (1 : 400; the priors say 1 : 50).
  for (let i = 0; i < 60; i++) {
    const promptTokens = 50 + ((i * 37) % 11) * 300;
    const completionTokens = 10 + ((i * 13) % 7) * 60;
    const r = req(`g${i}`, promptTokens * 4);
    const t0 = i * 100_000;
    const wall = (promptTokens * 0.00005 + completionTokens * 0.02) * 1000;
    p.onDispatch?.(r, b, t0);
    const report = {
      ok: true,
      dispatchedAt: t0,
      firstByteAt: t0 + wall,
      firstByteIsWholeAnswer: true,
      finishedAt: t0 + wall,
      promptTokens,
      completionTokens,
    };
    p.onComplete?.(r, b, report, report.finishedAt);
  }
  const d = p.describe!('gpu');
  assert.ok(d.prefillSPerToken! > 0.00004 && d.prefillSPerToken! < 0.00006, `prefill ${d.prefillSPerToken}`);
  assert.ok(d.decodeSPerToken! > 0.018 && d.decodeSPerToken! < 0.022, `decode ${d.decodeSPerToken}`);
});

/** The policy's response-ratio queue order (it must have one). */
function ratioOrder(p: Policy): ResponseRatioOrder {
  const o = p.queueOrder;
  assert.ok(o?.kind === 'response-ratio');
  return o;
}
