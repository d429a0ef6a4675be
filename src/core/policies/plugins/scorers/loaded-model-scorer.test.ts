import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, scoresOf } from '../../../testing.js';

test('loaded-model-scorer: 1 where the model is loaded, 0 where another is, 0.5 when unknown', () => {
  const s = makePlugin('scorer', 'loaded-model-scorer');
  const bs = [
    backendView('a', 0, { loadedModels: new Set(['m']) }),
    backendView('b', 1, { loadedModels: new Set(['other']) }),
    backendView('c', 2),
  ];
  assert.deepEqual(scoresOf(s, requestInfo('r'), bs), [1, 0, 0.5]);
});
