import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addFlight, newBackendState, type Flight } from './backend-state.js';
import {
  candidateCost,
  finishEstimate,
  missPenalty,
  missPrice,
  queuedPastSlots,
  ttftPenalty,
} from './candidate-cost.js';
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

test('miss penalty: each candidate pays missWeight × the prefill of what it would prefill beyond the best-cached one', () => {
  const w = new WaitModel(new Rates(0.001, 0.05), { expectedOf: (f) => f.expectedOut });
  const fast = newBackendState('fast', 0.1);
  fast.prefill.update(100, 0.05);
  fast.prefill.update(1000, 0.5); // 0.5 ms a token
  const unknown = newBackendState('new', 0.1); // no samples: the prior, 1 ms a token
  const costs = [fast, unknown, fast];
  const out = Float64Array.of(10, 10, 10);
  // Candidate 2 holds all but 100 tokens; 0 would prefill 2,000 (1,900 more), 1 would prefill 1,100.
  missPenalty(w, costs, Float64Array.of(2000, 1100, 100), 3, 2, out);
  near(out[0]!, 10 + 2 * 0.0005 * 1900);
  near(out[1]!, 10 + 2 * 0.001 * 1000);
  assert.equal(out[2], 10);
  // Nobody holds more than another, or the weight is 0: unchanged.
  const same = Float64Array.of(1, 2, 3);
  missPenalty(w, costs, Float64Array.of(500, 500, 500), 3, 2, same);
  assert.deepEqual([...same], [1, 2, 3]);
  missPenalty(w, costs, Float64Array.of(2000, 1100, 100), 3, 0, same);
  assert.deepEqual([...same], [1, 2, 3]);
});

test('miss price: missWeight plus queueWeight × the requests queued past their slots, averaged over the candidates', () => {
  const states = ['a', 'b', 'c'].map((n) => newBackendState(n, 0.1));
  for (let i = 0; i < 7; i++) addFlight(states[0]!, `a${i}`, flight(0, 100)); // 4 slots: 3 queued
  for (let i = 0; i < 9; i++) addFlight(states[1]!, `b${i}`, flight(0, 100)); // 3 slots: 6 queued
  for (let i = 0; i < 50; i++) addFlight(states[2]!, `c${i}`, flight(0, 100)); // no limit known: none
  const slots = Float64Array.of(4, 3, Infinity);
  near(missPrice(queuedPastSlots(states, slots, 3), 3, 2, 3), 2 + (3 * (3 + 6)) / 3);
  // Only the first n candidates count; no queue, or a weight of 0: missWeight.
  near(missPrice(queuedPastSlots(states, slots, 1), 1, 2, 3), 2 + 3 * 3);
  near(missPrice(queuedPastSlots(states, Float64Array.of(10, 10, 100), 3), 3, 2, 3), 2);
  near(missPrice(queuedPastSlots(states, slots, 3), 3, 2, 0), 2);
});

test('ttft penalty: ttftWeight × (the prefill it waits behind where it has room + its own uncached prefill)', () => {
  const w = new WaitModel(new Rates(0.001, 0.05), { expectedOf: (f) => f.expectedOut });
  const open = newBackendState('open', 0.1);
  const full = newBackendState('full', 0.1);
  for (const b of [open, full]) {
    b.prefill.update(100, 0.1); // 1 ms a token
    b.decode.update(1, 0.01);
    addFlight(b, `${b.name}-x`, flight(0, 500)); // 0.5 s of prefill left at 0
  }
  const slots = new Float64Array([Infinity, 1]);
  const uncached = new Float64Array([2000, 300]);
  const out = new Float64Array([10, 10]);
  ttftPenalty(w, [open, full], [open, full], slots, uncached, 0, 2, 2, out);
  // Room: 2 × (0.5 s behind the prefill in progress + 2 s its own).
  near(out[0]!, 10 + 2 * (0.5 + 2));
  // Full (one slot, taken): its slot wait is not priced, only its 0.3 s of prefill.
  near(out[1]!, 10 + 2 * 0.3);
  // Weight 0: nothing.
  const same = new Float64Array([10, 10]);
  ttftPenalty(w, [open, full], [open, full], slots, uncached, 0, 2, 0, same);
  assert.deepEqual(Array.from(same), [10, 10]);
  // The full one is one flight at its one slot: none queued past it; a second flight is.
  assert.equal(queuedPastSlots([open, full], slots, 2), 0);
  addFlight(full, 'full-y', flight(0, 100));
  assert.equal(queuedPastSlots([open, full], slots, 2), 1);
});
