import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addFlight, newBackendState, type BackendState, type Flight } from './backend-state.js';
import { Rates } from './rates.js';
import { WaitModel } from './wait-model.js';

const near = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-9, `${a} ≈ ${b}`);
const flight = (dispatchedAt: number, prefillTokens: number, expectedOut: number): Flight => ({
  dispatchedAt,
  promptTokens: prefillTokens,
  prefillTokens,
  cachedTokens: 0,
  model: 'm',
  maxTokens: undefined,
  expectedOut,
  predictedAtPush: expectedOut,
  ver: 0,
  ahead: 0,
  area0: 0,
});
/** A backend prefilling 1 ms a token, decoding 10 ms a token alone (+10 ms per other sequence). */
function measured(): BackendState {
  const b = newBackendState('a', 0.1);
  b.prefill.update(100, 0.1);
  b.decode.update(1, 0.01);
  b.decode.update(3, 0.03);
  return b;
}
const model = () => new WaitModel(new Rates(0.001, 0.05), { expectedOf: (f) => f.expectedOut });

test('wait model: below its slots a request waits only for the prompts still in prefill', () => {
  const w = model();
  const b = measured();
  addFlight(b, 'long', flight(0, 1000, 10)); // 1 s of prefill
  addFlight(b, 'short', flight(0, 200, 10)); // done by 0.2 s
  near(w.prefillWait(b, b, 400), 0.6);
  near(w.startWait(b, b, Infinity, 400, w.batchStepS(b, b, Infinity)), 0.6);
  near(w.prefillWait(b, b, 2000), 0);
  // The batch it joins: the two in flight and itself.
  near(w.batchStepS(b, b, Infinity), 0.03);
  near(w.batchStepS(b, b, 2), 0.02);
});

test('wait model: a full engine replays its flights FIFO over its slots', () => {
  const w = model();
  const b = measured();
  // One slot, each request 0.1 s of prefill + 10 tokens × 10 ms.
  addFlight(b, 'running', flight(0, 100, 10));
  addFlight(b, 'queued', flight(0, 100, 10));
  near(w.slotWait(b, b, 50, 1, 0.01), 0.15 + 0.2);
  // Two slots: both run; the first to free is the one with less left.
  near(w.slotWait(b, b, 50, 2, 0.01), 0.15);
  near(w.startWait(b, b, 1, 50, 0.01), 0.35);
});

test('wait model: the delay a request adds to the others — its prefill stalls them, its decode slows them', () => {
  const w = model();
  const b = measured();
  addFlight(b, 'x', flight(0, 100, 10));
  addFlight(b, 'y', flight(0, 100, 10));
  assert.equal(w.delayToOthers(newBackendState('idle', 0.1), b, Infinity, 0, 500, 4), 0);
  // 2 others × 0.5 s stall + 10 ms per token of overlap (4 tokens each, its whole answer).
  near(w.delayToOthers(b, b, Infinity, 0, 500, 4), 2 * 0.5 + 0.01 * 8);
  // A longer answer overlaps only what the others have left (10 tokens each).
  near(w.delayToOthers(b, b, Infinity, 0, 500, 40), 2 * 0.5 + 0.01 * 20);
  // One slot: it runs alone once admitted, delaying no one.
  assert.equal(w.delayToOthers(b, b, 1, 0, 500, 4), 0);
});

test('wait model: what flights add is kept until the fits, flights, instant, cost or slots change', () => {
  const w = model();
  const b = measured();
  addFlight(b, 'x', flight(0, 1000, 10));
  const step = w.batchStepS(b, b, Infinity);
  near(w.startWait(b, b, Infinity, 0, step), 1);
  b.prefill.update(1000, 3); // slower prefill learned, but not announced yet
  near(w.startWait(b, b, Infinity, 0, step), 1);
  w.fitsChanged();
  assert.ok(w.startWait(b, b, Infinity, 0, step) > 1.5);
  const before = w.startWait(b, b, Infinity, 0, step);
  addFlight(b, 'y', flight(0, 4000, 10));
  assert.ok(w.startWait(b, b, Infinity, 0, step) > before, 'a new flight invalidates the load');
});
