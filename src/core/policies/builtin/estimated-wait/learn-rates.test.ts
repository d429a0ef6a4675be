import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView } from '../../../testing.js';
import type { CompletionReport } from '../../../types.js';
import { addFlight, advanceArea, newBackendState, type Flight } from './backend-state.js';
import { CachedPrefix } from './cached-prefix.js';
import { learnRates } from './learn-rates.js';
import { Rates } from './rates.js';

const near = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-9, `${a} ≈ ${b}`);
const ctx = { rates: new Rates(0.001, 0.05), prefix: new CachedPrefix(1, 64), defaultSlots: 1 };
const flight = (ahead: number, cachedTokens = 0): Flight => ({
  dispatchedAt: 0,
  promptTokens: 100,
  prefillTokens: 100 - cachedTokens,
  cachedTokens,
  model: 'm',
  maxTokens: undefined,
  expectedOut: 50,
  predictedAtPush: 50,
  ver: 0,
  ahead,
  area0: 0,
});
/** An answer of 100 prompt and 100 output tokens: `prefillMs` + 1 s of decode in the engine, `wallMs` end to end. */
const engine = (prefillMs: number, wallMs: number): CompletionReport => ({
  ok: true,
  dispatchedAt: 0,
  finishedAt: wallMs,
  promptTokens: 100,
  completionTokens: 100,
  promptEvalMs: prefillMs,
  evalMs: 1000,
});
/** b with flight f in flight alone from 0 to `now` (its area brought up to then). */
function withFlight(f: Flight, now: number) {
  const b = newBackendState('a', 0.1);
  addFlight(b, 'x', f);
  advanceArea(b, now);
  return b;
}

test('learn rates: engine durations fit prefill per token and the decode step at the batch it ran in', () => {
  const b = withFlight(flight(0), 1100);
  learnRates(ctx, b, backendView('a', 0), b.flights[0]!, engine(100, 1100), 1100);
  near(b.prefill.at(100)!, 0.1);
  near(b.decode.at(1)!, 0.01);
  assert.equal(b.slots, 1);
  assert.equal(b.queuedAt, Infinity);
});

test('learn rates: a request that spent far longer than its engine time queued — its count ahead is the limit', () => {
  const b = withFlight(flight(1), 5000);
  learnRates(ctx, b, backendView('a', 0), b.flights[0]!, engine(100, 5000), 5000);
  assert.equal(b.queuedAt, 1);
  // One that did not queue with 3 ahead raises the slots seen, past the limit: it was transient.
  const f = flight(3);
  learnRates(ctx, b, backendView('a', 0), f, engine(100, 1100), 1100);
  assert.equal(b.slots, 4);
  assert.equal(b.queuedAt, Infinity);
});

test('learn rates: prefill is fitted against the tokens the engine did not hold cached', () => {
  const b = withFlight(flight(0, 80), 1100);
  learnRates(ctx, b, backendView('a', 0), b.flights[0]!, engine(100, 1100), 1100);
  // 0.1 s for the 20 uncached tokens: 5 ms a token.
  near(b.prefill.slope!, 0.005);
});

test('learn rates: a streamed answer without engine durations is split at its first byte', () => {
  const b = withFlight(flight(0), 2100);
  const r: CompletionReport = {
    ok: true,
    dispatchedAt: 0,
    firstByteAt: 100,
    finishedAt: 2080,
    promptTokens: 100,
    completionTokens: 100,
  };
  learnRates(ctx, b, backendView('a', 0), b.flights[0]!, r, 2080);
  near(b.prefill.at(100)!, 0.1);
  near(b.decode.at(1)!, 1.98 / 99);
});
