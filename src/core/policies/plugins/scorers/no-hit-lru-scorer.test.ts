import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, scoresOf } from '../../../testing.js';
import type { Plugin } from '../../framework/plugin.js';

const bs = [backendView('a', 0), backendView('b', 1), backendView('c', 2)];
const prompt = (tag: string) => `${tag} `.repeat(80);

test('no-hit-lru-scorer spreads cold requests in least-recently-used order; hot ones get 0.5', () => {
  const prefix = makePlugin('scorer', 'prefix-cache-scorer');
  const lookup = (n: string): Plugin | undefined => (n === 'prefix-cache-scorer' ? prefix : undefined);
  const s = makePlugin('scorer', 'no-hit-lru-scorer', {}, { lookup });
  const send = (id: string, text: string, to: number) => {
    const r = requestInfo(id, text);
    const got = scoresOf(s, r, bs);
    prefix.onDispatch!(r, bs[to]!, 0);
    s.onDispatch!(r, bs[to]!, 0);
    return got;
  };
  // Nothing tracked: all 1. Then b took a cold one: it is the most recent (0); a and c untracked (1).
  assert.deepEqual(send('1', prompt('one'), 1), [1, 1, 1]);
  assert.deepEqual(send('2', prompt('two'), 0), [1, 0, 1]);
  // Now a is the newest (0), b older (1/2), c untracked (1).
  assert.deepEqual(scoresOf(s, requestInfo('3', prompt('three')), bs), [0, 0.5, 1]);
  // A prompt b has seen is hot: 0.5 everywhere.
  assert.deepEqual(scoresOf(s, requestInfo('4', prompt('one')), bs), [0.5, 0.5, 0.5]);
});

test("no-hit-lru-scorer loads without a declared prefix plugin (Heimdall's example) and keeps its own", () => {
  const s = makePlugin('scorer', 'no-hit-lru-scorer');
  assert.equal(s.uses?.length, 1);
  const own = s.uses![0]!;
  const r = requestInfo('1', prompt('x'));
  assert.deepEqual(scoresOf(s, r, bs), [1, 1, 1]);
  own.onDispatch!(r, bs[0]!, 0);
  s.onDispatch!(r, bs[0]!, 0);
  assert.deepEqual(scoresOf(s, requestInfo('2', prompt('x')), bs), [0.5, 0.5, 0.5]);
  assert.throws(
    () =>
      makePlugin(
        'scorer',
        'no-hit-lru-scorer',
        { prefixPluginName: 'q' },
        { lookup: () => makePlugin('scorer', 'queue-scorer') },
      ),
    /not a prefix plugin/,
  );
});
