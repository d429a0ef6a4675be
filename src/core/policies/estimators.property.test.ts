import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Scheduler } from '../scheduler.js';
import { createPolicy } from './index.js';
import { createRng } from '../rng.js';
import type { Decision } from '../types.js';

/** One thing that can happen to the router, drawn at random. */
const op = fc.oneof(
  fc.record({
    kind: fc.constant('arrive' as const),
    prompt: fc.oneof(
      fc.constant(''),
      fc.constant('   \n\t '),
      fc.string({ maxLength: 400 }),
      fc.constant('x'.repeat(20000)),
    ),
    maxTokens: fc.option(fc.integer({ min: 1, max: 4096 }), { nil: undefined }),
  }),
  fc.record({
    kind: fc.constant('finish' as const),
    which: fc.nat(),
    ok: fc.boolean(),
    promptTokens: fc.option(fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 100000 })), {
      nil: undefined,
    }),
    completionTokens: fc.option(fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 100000 })), {
      nil: undefined,
    }),
    engineMs: fc.option(
      fc.tuple(fc.double({ min: 0, max: 1e6, noNaN: true }), fc.double({ min: 0, max: 1e6, noNaN: true })),
      {
        nil: undefined,
      },
    ),
    firstByte: fc.boolean(),
  }),
  fc.record({ kind: fc.constant('cancel' as const), which: fc.nat() }),
  fc.record({ kind: fc.constant('tick' as const), ms: fc.double({ min: 0, max: 120000, noNaN: true }) }),
);

for (const name of ['ollama-router', 'estimated-wait']) {
  test(`${name}: no estimate ever becomes NaN, Infinity or negative; counters settle`, () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 120 }), fc.integer({ min: 1, max: 4 }), (ops, nBackends) => {
        const s = new Scheduler({ policy: createPolicy(name, createRng(3)) });
        for (let i = 0; i < nBackends; i++) {
          s.addBackend({
            name: `b${i}`,
            api: 'ollama',
            models: ['m'],
            maxConcurrency: i === 0 ? 2 : Infinity,
            weight: 1,
          });
        }
        let now = 0;
        let id = 0;
        const pushed: { id: string; at: number }[] = [];
        const track = (ds: Decision[]): void => {
          for (const d of ds) if (d.type === 'dispatch') pushed.push({ id: d.request.id, at: now });
        };
        for (const o of ops) {
          if (o.kind === 'tick') now += o.ms;
          else if (o.kind === 'arrive') {
            track(
              s.submit(
                {
                  id: String(id++),
                  model: 'm',
                  api: 'ollama',
                  arrivedAt: now,
                  promptText: o.prompt,
                  maxTokens: o.maxTokens,
                },
                now,
              ),
            );
          } else if (o.kind === 'cancel') {
            if (pushed.length === 0) continue;
            const [p] = pushed.splice(o.which % pushed.length, 1);
            track(s.cancel(p!.id, now).decisions);
          } else {
            if (pushed.length === 0) continue;
            const [p] = pushed.splice(o.which % pushed.length, 1);
            track(
              s.complete(
                p!.id,
                {
                  ok: o.ok,
                  dispatchedAt: p!.at,
                  finishedAt: now,
                  firstByteAt: o.firstByte ? p!.at + (now - p!.at) / 2 : undefined,
                  promptTokens: o.promptTokens,
                  completionTokens: o.completionTokens,
                  promptEvalMs: o.engineMs?.[0],
                  evalMs: o.engineMs?.[1],
                },
                now,
              ),
            );
          }
          for (const b of s.backendViews()) {
            for (const [k, v] of Object.entries(s.describe(b.name))) {
              assert.ok(Number.isFinite(v) && v >= 0, `${b.name}.${k} = ${v}`);
              if (k === 'queueWeight') assert.ok(v <= 2);
            }
          }
        }
        // Finish everything: in-flight returns to zero and so do the policies' queues.
        for (const p of pushed.splice(0))
          track(s.complete(p.id, { ok: true, dispatchedAt: p.at, finishedAt: now }, now));
        while (pushed.length > 0)
          for (const p of pushed.splice(0))
            track(s.complete(p.id, { ok: false, dispatchedAt: p.at, finishedAt: now }, now));
        assert.equal(s.inFlightTotal, 0);
        for (const b of s.backendViews()) {
          assert.equal(b.inFlight, 0);
          const d = s.describe(b.name);
          if ('queueChars' in d) assert.equal(d.queueChars, 0);
          if ('inFlightTracked' in d) assert.equal(d.inFlightTracked, 0);
        }
      }),
      { numRuns: 300 },
    );
  });
}
