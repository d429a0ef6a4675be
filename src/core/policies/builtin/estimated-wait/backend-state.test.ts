import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView } from '../../../testing.js';
import { addFlight, advanceArea, BackendRegistry, removeFlight, type Flight } from './backend-state.js';

const flight = (dispatchedAt: number): Flight => ({
  dispatchedAt,
  promptTokens: 10,
  prefillTokens: 10,
  cachedTokens: 0,
  model: 'm',
  maxTokens: undefined,
  expectedOut: 5,
  predictedAtPush: 5,
  ver: 0,
  ahead: 0,
  area0: 0,
});

test('backend registry: one state per name, found by index while the index names it, forgotten on removal', () => {
  const r = new BackendRegistry(0.1);
  const a = r.stateOf(backendView('a', 0));
  assert.equal(r.stateOf(backendView('a', 0)), a);
  assert.equal(r.state('a'), a);
  // Index 0 now names another backend: a new state, not a's.
  const b = r.stateOf(backendView('b', 0));
  assert.notEqual(b, a);
  assert.deepEqual(
    r.list.map((s) => s.name),
    ['a', 'b'],
  );
  r.remove('a');
  assert.equal(r.get('a'), undefined);
  assert.deepEqual(
    r.list.map((s) => s.name),
    ['b'],
  );
  assert.notEqual(r.stateOf(backendView('a', 1)), a, 'a removed backend comes back with nothing learned');
});

test('backend state: flights in dispatch order, a re-push keeps its place, the in-flight area integrates', () => {
  const s = new BackendRegistry(0.1).state('a');
  advanceArea(s, 0);
  addFlight(s, 'x', flight(0));
  advanceArea(s, 100);
  addFlight(s, 'y', flight(100));
  advanceArea(s, 200);
  assert.equal(s.area, 1 * 100 + 2 * 100);
  const again = flight(150);
  const v0 = s.flightsVersion;
  addFlight(s, 'x', again);
  assert.equal(s.flights[0], again);
  assert.equal(s.flights.length, 2);
  assert.ok(s.flightsVersion > v0);
  assert.equal(removeFlight(s, 'x'), again);
  assert.equal(removeFlight(s, 'x'), undefined);
  assert.deepEqual(
    s.flights.map((f) => f.dispatchedAt),
    [100],
  );
  // Time never runs back: an earlier instant adds nothing.
  advanceArea(s, 150);
  assert.equal(s.area, 300);
});
