import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRng } from '../../rng.js';
import { backendView, requestInfo } from '../../testing.js';
import { WorkloadParams, WorkloadTracker, type BackendWork } from './workload-tracker.js';

/** The scans as first written: over the flights map, producedBy per flight. */
function reference(t: WorkloadTracker, name: string, now: number) {
  const w: BackendWork = t.work(name);
  let ctx = 0;
  let rem = 0;
  let earliest = Infinity;
  for (const f of w.flights.values()) {
    const d = t.producedBy(f, name, now);
    ctx += f.promptTokens + d;
    rem += (d > 0 ? 0 : f.promptTokens) + (f.expectedOut - d);
    earliest = Math.min(earliest, (f.expectedOut - d) * t.decodeS(name));
  }
  return { ctx, rem, earliest: w.flights.size === 0 ? 0 : Math.max(0, earliest) };
}

test('the flight columns and their done marks answer exactly as a pass over the flights map', () => {
  const rng = createRng(3);
  const t = new WorkloadTracker(WorkloadParams.parse({ kvCapacityTokens: 4096 }));
  const backends = [backendView('a', 0), backendView('b', 1)];
  const open: { id: string; b: number; at: number }[] = [];
  let now = 0;
  let marked = 0;
  for (let i = 0; i < 600; i++) {
    now += rng() * 1000;
    if (open.length > 0 && rng() < 0.45) {
      // Completions out of dispatch order; most report speeds (new speeds forget the done marks).
      const k = Math.floor(rng() * open.length);
      const f = open.splice(k, 1)[0]!;
      const out = 1 + Math.floor(rng() * 300);
      t.onComplete(requestInfo(f.id), backends[f.b]!, {
        ok: rng() < 0.9,
        dispatchedAt: f.at,
        firstByteAt: f.at + 50,
        finishedAt: now,
        completionTokens: out,
        ...(rng() < 0.7 ? { evalMs: out * (10 + rng() * 20), promptEvalMs: 5 + rng() * 50 } : {}),
      });
    } else {
      const id = `r${i}`;
      const b = Math.floor(rng() * 2);
      t.onDispatch(requestInfo(id, 'word '.repeat(Math.floor(rng() * 300))), backends[b]!, now);
      open.push({ id, b, at: now });
    }
    // Now (marks kept from step to step until speeds change), and at times an earlier instant
    // (marks made later must not be trusted there).
    for (const at of rng() < 0.1 ? [now, now - 3_000] : [now]) {
      for (const { name } of backends) {
        const r = reference(t, name, at);
        t.remainingTokens(name, at);
        marked += t.work(name).done.reduce((x, y) => x + y, 0);
        assert.equal(t.contextTokens(name, at), r.ctx, `ctx ${name} step ${i}`);
        assert.equal(t.remainingTokens(name, at), r.rem, `remaining ${name} step ${i}`);
        assert.equal(t.earliestCompletionS(name, at), r.earliest, `earliest ${name} step ${i}`);
      }
    }
  }
  assert.ok(open.length > 20, 'flights were in progress at once');
  assert.ok(marked > 1000, `${marked} flights were marked done when scanned`);
});

test('kept features go back to the predictor at completion, so its store does not grow', () => {
  const t = new WorkloadTracker(WorkloadParams.parse({}));
  const b = backendView('a', 0);
  for (let i = 0; i < 200; i++) {
    const req = requestInfo(`r${i}`, `prompt number ${i} with some words`);
    t.onDispatch(req, b, i);
    t.onComplete(req, b, { ok: i % 3 !== 0, dispatchedAt: i, finishedAt: i + 1, completionTokens: 40 });
  }
  // One vector was ever in use at a time: the next one kept reuses the first.
  assert.equal(t.predictor.keep(t.predictor.features({ model: 'm', promptTokens: 3, text: 'x y' })), 0);
});

test('issue #34: a non-streamed answer teaches decode from its wall time, not "decode took 0"', () => {
  const t = new WorkloadTracker(WorkloadParams.parse({}));
  const b = backendView('a', 0);
  for (let i = 0; i < 30; i++) {
    const req = requestInfo(`r${i}`, 'hi');
    const t0 = i * 10_000;
    t.onDispatch(req, b, t0);
    // 1 prompt token, 223 output tokens, 4.04 s; its only byte came at the end.
    t.onComplete(req, b, {
      ok: true,
      dispatchedAt: t0,
      // Its first chunk came just before its end (a body in two chunks).
      firstByteAt: t0 + 4039,
      firstByteIsWholeAnswer: true,
      finishedAt: t0 + 4040,
      promptTokens: 1,
      completionTokens: 223,
    });
  }
  const d = t.decodeS('a');
  assert.ok(Math.abs(d - 4.04 / 223) < 0.002, `decode ${d} s/token`);
  assert.ok(t.prefillS('a') < 0.01, `prefill ${t.prefillS('a')} s/token`);
  for (const v of Object.values(t.describe('a'))) assert.ok(Number.isFinite(v));
});
