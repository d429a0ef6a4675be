import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, chosen } from '../../testing.js';
import type { Filter, Picker, ScoreExplanation } from './plugin.js';
import { HOLD, type Hold, type HoldReason } from '../../types.js';
import { ProfilePolicy } from './profile.js';

const ok = { ok: true, dispatchedAt: 0, finishedAt: 1 };

test('a profile sums weighted scores and explains each decision', () => {
  const queue = makePlugin('scorer', 'queue-scorer');
  const active = makePlugin('scorer', 'active-request-scorer', { requestTimeout: 0 });
  const p = new ProfilePolicy({
    name: 'mix',
    filters: [],
    scorers: [
      { scorer: queue, weight: 2 },
      { scorer: active, weight: 1 },
    ],
    picker: makePlugin('picker', 'max-score-picker'),
  });
  const seen: ScoreExplanation[] = [];
  p.explain = (e) => seen.push(e);
  const m = (waiting: number) => ({ running: 1, waiting, kvUsage: 0, at: 0 });
  // a: short engine queue but many in flight; b: longer queue, idle router-side. Weight 2 on queue wins.
  const bs = [
    backendView('a', 0, { metrics: m(0), inFlight: 4 }),
    backendView('b', 1, { metrics: m(6), inFlight: 0 }),
  ];
  assert.equal(chosen(p.pick(requestInfo('1'), bs, 0))?.name, 'a');
  assert.deepEqual(seen[0]!.backends, ['a', 'b']);
  assert.deepEqual(seen[0]!.totals, [2, 1]);
  assert.deepEqual(
    seen[0]!.scorers.map((s) => [s.name, s.weight, s.scores]),
    [
      ['queue-scorer', 2, [1, 0]],
      ['active-request-scorer', 1, [0, 1]],
    ],
  );
  assert.deepEqual(seen[0]!.picked, ['a']);
});

test('an empty filter result holds the request and names the filter', () => {
  const none: Filter = { kind: 'filter', type: 'none', name: 'nothing-free', filter: () => [] };
  const p = new ProfilePolicy({
    name: 'held',
    filters: [none],
    scorers: [],
    picker: makePlugin('picker', 'round-robin-picker'),
  });
  let held: string | undefined;
  p.explain = (e) => (held = e.heldBy);
  assert.equal(p.pick(requestInfo('1'), [backendView('a', 0)], 0), HOLD.retry); // no hold trait: retry
  assert.equal(held, 'nothing-free');
});

test('a hold stands as the weakest of the filters up to the one that held (and of the picker)', () => {
  const filter = (name: string, hold: HoldReason | undefined, empty: () => boolean): Filter => ({
    kind: 'filter',
    type: name,
    name,
    ...(hold ? { traits: { hold } } : {}),
    filter: (_r, c) => (empty() ? [] : c),
  });
  let emptyAt = '';
  const f = (name: string, hold: HoldReason | undefined): Filter =>
    filter(name, hold, () => emptyAt === name);
  let pickerHold: Hold = HOLD.load;
  const picker: Picker = { kind: 'picker', type: 'p', name: 'p', pick: () => pickerHold };
  const p = new ProfilePolicy({
    name: 'mix',
    filters: [f('load', 'load'), f('change', 'until-change'), f('plain', undefined)],
    scorers: [],
    picker,
  });
  const ask = () => p.pick(requestInfo('1'), [backendView('a', 0)], 0);
  emptyAt = 'load';
  assert.equal(ask(), HOLD.load);
  emptyAt = 'change';
  assert.equal(ask(), HOLD.untilChange);
  emptyAt = 'plain';
  assert.equal(ask(), HOLD.retry);
  // The picker's hold stands only when every filter's would: here one holds on neither.
  emptyAt = '';
  assert.equal(ask(), HOLD.retry);
  const q = new ProfilePolicy({ name: 'q', filters: [f('load', 'load')], scorers: [], picker });
  assert.equal(q.pick(requestInfo('1'), [backendView('a', 0)], 0), HOLD.load);
  pickerHold = HOLD.untilChange;
  assert.equal(q.pick(requestInfo('1'), [backendView('a', 0)], 0), HOLD.untilChange);
  const r = new ProfilePolicy({ name: 'r', filters: [f('change', 'until-change')], scorers: [], picker });
  assert.equal(r.pick(requestInfo('1'), [backendView('a', 0)], 0), HOLD.untilChange);
  pickerHold = HOLD.load; // a load hold behind an until-change filter: asked again at every pump
  assert.equal(r.pick(requestInfo('1'), [backendView('a', 0)], 0), HOLD.retry);
});

test("maxNumOfEndpoints: a retried request goes to the picker's next endpoint", () => {
  const p = new ProfilePolicy({
    name: 'retry',
    filters: [],
    scorers: [{ scorer: makePlugin('scorer', 'active-request-scorer', { requestTimeout: 0 }), weight: 1 }],
    picker: makePlugin('picker', 'max-score-picker', { maxNumOfEndpoints: 3 }),
  });
  const bs = [
    backendView('a', 0, { inFlight: 2 }),
    backendView('b', 1, { inFlight: 0 }),
    backendView('c', 2, { inFlight: 1 }),
  ];
  const r = requestInfo('1');
  assert.equal(chosen(p.pick(r, bs, 0))?.name, 'b');
  p.onComplete(r, bs[1]!, { ...ok, ok: false }, 1);
  // b failed and is excluded by the router now; the remembered order says c, then a — even if a looks better now.
  const now = [backendView('a', 0, { inFlight: 0 }), backendView('c', 2, { inFlight: 5 })];
  assert.equal(chosen(p.pick(r, now, 2))?.name, 'c');
  // A success forgets the order.
  p.onComplete(r, bs[2]!, ok, 3);
  assert.equal(chosen(p.pick(r, now, 4))?.name, 'a');
});

test('dynamic weights switch on above the threshold and off below (with hysteresis)', () => {
  const queue = makePlugin('scorer', 'queue-scorer');
  const rr = makePlugin('scorer', 'active-request-scorer', { requestTimeout: 0 });
  const p = new ProfilePolicy({
    name: 'adaptive',
    filters: [],
    scorers: [
      { scorer: queue, weight: 0 },
      { scorer: rr, weight: 1 },
    ],
    picker: makePlugin('picker', 'max-score-picker'),
    dynamicWeights: [{ signal: 'maxEngineWaiting', above: 10, below: 5, set: { 'queue-scorer': 3 } }],
  });
  const m = (waiting: number) => ({ running: 1, waiting, kvUsage: 0, at: 0 });
  const at = (wa: number, wb: number) => [
    backendView('a', 0, { metrics: m(wa), inFlight: 0 }),
    backendView('b', 1, { metrics: m(wb), inFlight: 1 }),
  ];
  // Light traffic: queue-scorer is off; the idle a wins on active requests.
  assert.equal(chosen(p.pick(requestInfo('1'), at(8, 0), 0))?.name, 'a');
  assert.deepEqual(p.currentWeights(), { 'queue-scorer': 0, 'active-request-scorer': 1 });
  // a's engine queue passes 10: queue-scorer weighs 3 and b (empty queue) wins.
  assert.equal(chosen(p.pick(requestInfo('2'), at(12, 0), 0))?.name, 'b');
  assert.equal(p.currentWeights()['queue-scorer'], 3);
  // Between below and above: stays on.
  assert.equal(chosen(p.pick(requestInfo('3'), at(7, 0), 0))?.name, 'b');
  // Under 5: back to the profile's weights.
  assert.equal(chosen(p.pick(requestInfo('4'), at(4, 0), 0))?.name, 'a');
  assert.equal(p.currentWeights()['queue-scorer'], 0);
});

test('dynamic weights on an SLO: the share of recent TTFT misses', () => {
  const load = makePlugin('scorer', 'load-aware-scorer');
  const p = new ProfilePolicy({
    name: 'slo',
    filters: [],
    scorers: [{ scorer: load, weight: 1 }],
    picker: makePlugin('picker', 'max-score-picker'),
    dynamicWeights: [
      { signal: 'ttftSloMissRatio', ttftSloMs: 1000, window: 4, above: 0.5, set: { 'load-aware-scorer': 5 } },
    ],
  });
  const b = backendView('a', 0);
  const finish = (id: string, ttft: number) =>
    p.onComplete(
      requestInfo(id),
      b,
      { ok: true, dispatchedAt: 0, firstByteAt: ttft, finishedAt: ttft + 1 },
      0,
    );
  finish('1', 200);
  finish('2', 3000);
  p.pick(requestInfo('x'), [b], 0);
  assert.equal(p.currentWeights()['load-aware-scorer'], 1); // 1 of 2 missed: not above 0.5
  finish('3', 4000);
  p.pick(requestInfo('y'), [b], 0);
  assert.equal(p.currentWeights()['load-aware-scorer'], 5); // 2 of 3
  for (const id of ['4', '5', '6', '7']) finish(id, 10); // the window (4) now holds only hits
  p.pick(requestInfo('z'), [b], 0);
  assert.equal(p.currentWeights()['load-aware-scorer'], 1);
  // Issue #34: whole (non-streamed) answers show no TTFT; their long wall times are no misses.
  for (const id of ['8', '9', '10', '11'])
    p.onComplete(
      requestInfo(id),
      b,
      { ok: true, dispatchedAt: 0, firstByteAt: 60_000, firstByteIsWholeAnswer: true, finishedAt: 60_000 },
      0,
    );
  p.pick(requestInfo('w'), [b], 0);
  assert.equal(p.currentWeights()['load-aware-scorer'], 1);
  // A failed one that got no byte at all still is: the client waited and got nothing.
  for (const id of ['12', '13', '14'])
    p.onComplete(
      requestInfo(id),
      b,
      { ok: false, dispatchedAt: 0, firstByteIsWholeAnswer: true, finishedAt: 9 },
      0,
    );
  p.pick(requestInfo('v'), [b], 0);
  assert.equal(p.currentWeights()['load-aware-scorer'], 5);
});

test('a scorer returning NaN or out-of-range values cannot poison the totals', () => {
  const bad = {
    kind: 'scorer' as const,
    type: 'bad',
    name: 'bad',
    score: (_r: unknown, _c: unknown, _n: number, out: Float64Array) => out.set([NaN, 7, -3]),
  };
  const p = new ProfilePolicy({
    name: 'x',
    filters: [],
    scorers: [{ scorer: bad, weight: 1 }],
    picker: makePlugin('picker', 'max-score-picker'),
  });
  let totals: readonly number[] = [];
  p.explain = (e) => (totals = e.totals);
  assert.equal(
    chosen(p.pick(requestInfo('1'), [backendView('a', 0), backendView('b', 1), backendView('c', 2)], 0))
      ?.name,
    'b',
  );
  assert.deepEqual(totals, [0, 1, 0]);
});

test('readsMetrics: a profile of metric-free plugins that never holds needs no metrics; one reading them does', () => {
  const active = () => makePlugin('scorer', 'active-request-scorer', { requestTimeout: 0 });
  const picker = () => makePlugin('picker', 'max-score-picker');
  const free = new ProfilePolicy({
    name: 'f',
    filters: [],
    scorers: [{ scorer: active(), weight: 1 }],
    picker: picker(),
  });
  assert.equal(free.traits.readsMetrics, false);
  const queue = new ProfilePolicy({
    name: 'q',
    filters: [],
    scorers: [{ scorer: makePlugin('scorer', 'queue-scorer'), weight: 1 }],
    picker: picker(),
  });
  assert.equal(queue.traits.readsMetrics, true);
  // A dynamic weight on the engines' waiting counts reads metrics; one on in-flight counts does not.
  const rule = (signal: 'maxEngineWaiting' | 'maxInFlight') =>
    new ProfilePolicy({
      name: 'r',
      filters: [],
      scorers: [{ scorer: active(), weight: 1 }],
      picker: picker(),
      dynamicWeights: [{ signal, above: 1, set: { 'active-request-scorer': 2 } }],
    });
  assert.equal(rule('maxEngineWaiting').traits.readsMetrics, true);
  assert.equal(rule('maxInFlight').traits.readsMetrics, false);
  // A filter may hold, whatever it reads.
  const filtered = new ProfilePolicy({
    name: 'k',
    filters: [makePlugin('filter', 'kv-fit-filter', { kvCapacityTokens: 1000 }) as Filter],
    scorers: [],
    picker: picker(),
  });
  assert.equal(filtered.traits.holds, true);
});
