import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, scoresOf } from '../../../testing.js';

test('session-affinity-scorer prefers the backend that served the session last', () => {
  const s = makePlugin('scorer', 'session-affinity-scorer', { maxSessions: 2 });
  const bs = [backendView('a', 0), backendView('b', 1)];
  const turn = (id: string, key?: string) => requestInfo(id, '', key ? { sessionKey: key } : {});
  assert.deepEqual(scoresOf(s, turn('1', 'alice'), bs), [0, 0]);
  s.onDispatch!(turn('1', 'alice'), bs[1]!, 0);
  assert.deepEqual(scoresOf(s, turn('2', 'alice'), bs), [0, 1]);
  assert.deepEqual(scoresOf(s, turn('3', 'bob'), bs), [0, 0]);
  assert.deepEqual(scoresOf(s, turn('4'), bs), [0, 0]);
  // Bounded: two newer sessions push alice out.
  s.onDispatch!(turn('5', 'bob'), bs[0]!, 0);
  s.onDispatch!(turn('6', 'carol'), bs[0]!, 0);
  assert.deepEqual(scoresOf(s, turn('7', 'alice'), bs), [0, 0]);
  s.onBackendRemoved!('a');
  assert.deepEqual(scoresOf(s, turn('8', 'bob'), bs), [0, 0]);
});
