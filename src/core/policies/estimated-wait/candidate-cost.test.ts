import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addFlight, newBackendState, type Flight } from './backend-state.js';
import { candidateCost, finishEstimate } from './candidate-cost.js';
import { Rates } from './rates.js';
import { WaitModel } from './wait-model.js';

const near = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-9, `${a} ≈ ${b}`);
const flight = (dispatchedAt: number, prefillTokens: number): Flight => ({
  dispatchedAt,
  promptTokens: prefillTokens,
  prefillTokens,
  cachedTokens: 0,
  model: 'm',
  maxTokens: undefined,
  expectedOut: 10,
  predictedAtPush: 10,
  ver: 0,
  ahead: 0,
  area0: 0,
});

test('candidate cost: its wait, then its uncached prefill and decode, plus othersWeight × its delay to others', () => {
  const w = new WaitModel(new Rates(0.001, 0.05), { expectedOf: (f) => f.expectedOut });
  const b = newBackendState('a', 0.1);
  b.prefill.update(100, 0.1); // 1 ms a token
  b.decode.update(1, 0.01);
  b.decode.update(3, 0.03); // 10 ms a token, +10 ms per sequence in the batch
  addFlight(b, 'x', flight(0, 500)); // 0.5 s of prefill left at 0
  const finish = finishEstimate(w, b, b, Infinity, 0, 2000, 20);
  // 0.5 s wait + 2 s prefill + 20 tokens × 20 ms (a batch of 2).
  near(finish, 0.5 + 2 + 20 * 0.02);
  assert.equal(candidateCost(w, b, b, Infinity, 0, 2000, 20, 0), finish);
  const delay = w.delayToOthers(b, b, Infinity, 0, 2000, 20);
  assert.ok(delay > 0);
  assert.equal(candidateCost(w, b, b, Infinity, 0, 2000, 20, 1), finish + delay);
  assert.equal(candidateCost(w, b, b, Infinity, 0, 2000, 20, 0.5), finish + 0.5 * delay);
  // A cached prefix: only the uncached tokens are prefilled, and only they stall the others.
  near(candidateCost(w, b, b, Infinity, 0, 500, 20, 0), finish - 1.5);
  near(w.delayToOthers(b, b, Infinity, 0, 500, 20), delay - 1.5);
});
