import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, scoresOf } from '../../../testing.js';

test('active-request-scorer: none active 1, most active 0, proportional between', () => {
  const s = makePlugin('scorer', 'active-request-scorer', { requestTimeout: '2m' });
  const [a, b, c] = [backendView('a', 0), backendView('b', 1), backendView('c', 2)];
  for (let i = 0; i < 4; i++) s.onDispatch!(requestInfo(`b${i}`), b!, 0);
  for (let i = 0; i < 2; i++) s.onDispatch!(requestInfo(`c${i}`), c!, 0);
  assert.deepEqual(scoresOf(s, requestInfo('x'), [a!, b!, c!], 1000), [1, 0, 0.5]);
  s.onComplete!(requestInfo('b0'), b!, { ok: true, dispatchedAt: 0, finishedAt: 1 }, 1);
  assert.deepEqual(scoresOf(s, requestInfo('x'), [a!, b!, c!], 1000), [1, 0, 1 / 3]);
});

test('active-request-scorer forgets requests older than requestTimeout (Heimdall)', () => {
  const s = makePlugin('scorer', 'active-request-scorer', { requestTimeout: '30s' });
  const [a, b] = [backendView('a', 0), backendView('b', 1)];
  s.onDispatch!(requestInfo('old'), a!, 0);
  s.onDispatch!(requestInfo('new'), b!, 20_000);
  assert.deepEqual(scoresOf(s, requestInfo('x'), [a!, b!], 25_000), [0, 0]);
  // At 31 s the first one is assumed timed out by the engine; b's is still active.
  assert.deepEqual(scoresOf(s, requestInfo('x'), [a!, b!], 31_000), [1, 0]);
});

test('active-request-scorer with requestTimeout 0 is least-connections on the router count', () => {
  const s = makePlugin('scorer', 'active-request-scorer', { requestTimeout: 0 });
  const bs = [backendView('a', 0, { inFlight: 3 }), backendView('b', 1, { inFlight: 1 })];
  assert.deepEqual(scoresOf(s, requestInfo('x'), bs), [0, 2 / 3]);
});

test('active-request-scorer rejects an unparseable duration', () => {
  assert.throws(() => makePlugin('scorer', 'active-request-scorer', { requestTimeout: 'soon' }), /duration/);
});
