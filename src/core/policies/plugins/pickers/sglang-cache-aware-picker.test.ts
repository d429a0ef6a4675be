import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, listOf } from '../../../testing.js';
import type { BackendView } from '../../../types.js';
import type { Picker } from '../../framework/plugin.js';
import type { PrefixTrie } from '../../../prefix/prefix-trie.js';
import type { SglangCacheAwareDecision } from './sglang-cache-aware-picker.js';

type SglangPicker = Picker & {
  readonly trie: PrefixTrie;
  lastDecision(): SglangCacheAwareDecision | undefined;
};
const make = (params: Record<string, unknown> = {}): SglangPicker =>
  makePlugin('picker', 'sglang-cache-aware-picker', { chunkChars: 4, ...params }) as SglangPicker;
const none = new Float64Array(8);
let ids = 0;
function route(p: Picker, text: string, bs: readonly BackendView[]): string {
  const req = requestInfo(`s${ids++}`, text);
  const b = listOf(p.pick(req, bs, none, 0))[0]!;
  p.onDispatch!(req, b, 0);
  return b.name;
}

test('a match over cacheThreshold of the prompt follows the backend that was sent it', () => {
  const p = make();
  const bs = [backendView('a', 0), backendView('b', 1), backendView('c', 2)];
  const first = route(p, 'question one: ' + 'x'.repeat(60), bs);
  // Busier than the others, but not past the absolute threshold: locality wins.
  const loaded = bs.map((b) => (b.name === first ? { ...b, inFlight: 20 } : b));
  assert.equal(route(p, 'question one: ' + 'x'.repeat(60) + ' and a follow-up', loaded), first);
  assert.equal(p.lastDecision()!.reason, 'prefix');
});

test('a short match goes to the backend holding the least of the tree, not the least loaded', () => {
  const p = make();
  // 'a' was sent a lot of text before, 'b' a little, 'c' nothing yet but is the busiest now.
  route(p, 'A'.repeat(400), [backendView('a', 0)]);
  route(p, 'B'.repeat(40), [backendView('b', 1)]);
  const c = p.trie;
  assert.equal(c.heldBy(c.idOf('a')!), 100);
  assert.equal(c.heldBy(c.idOf('b')!), 10);
  const bs = [
    backendView('a', 0, { inFlight: 0 }),
    backendView('b', 1, { inFlight: 1 }),
    backendView('c', 2, { inFlight: 30 }),
  ];
  assert.equal(route(p, 'a brand new prompt nobody sent', bs), 'c', 'c holds nothing: "most cache room"');
  assert.equal(p.lastDecision()!.reason, 'smallest-tree');
  // Ties on tree size go to the less loaded.
  const q = make();
  assert.equal(
    route(q, 'fresh', [backendView('a', 0, { inFlight: 3 }), backendView('b', 1, { inFlight: 1 })]),
    'b',
  );
});

test('past both balance thresholds the least loaded wins, whatever the match', () => {
  const p = make({ balanceAbsThreshold: 4, balanceRelThreshold: 1.5 });
  const text = 'shared prefix '.repeat(8);
  route(p, text, [backendView('a', 0)]);
  const spread = (a: number, b: number): BackendView[] => [
    backendView('a', 0, { inFlight: a }),
    backendView('b', 1, { inFlight: b }),
  ];
  assert.equal(route(p, text, spread(5, 1)), 'a', 'a spread of 4 is not over the absolute threshold');
  assert.equal(route(p, text, spread(20, 15)), 'a', '20 > 15 + 4 but not > 1.5 × 15');
  assert.equal(route(p, text, spread(14, 9)), 'b');
  assert.equal(p.lastDecision()!.reason, 'imbalanced');
});

test('only candidates are chosen: a match held by a filtered-out backend is not followed', () => {
  const p = make();
  const text = 'q'.repeat(80);
  route(p, text, [backendView('a', 0)]);
  assert.equal(route(p, text, [backendView('b', 1), backendView('c', 2)]), 'b');
  assert.equal(p.lastDecision()!.reason, 'smallest-tree');
  p.trie.checkInvariants();
});

test('a removed backend leaves the tree and its count', () => {
  const p = make();
  route(p, 'z'.repeat(40), [backendView('a', 0)]);
  route(p, 'z'.repeat(40), [backendView('b', 1)]);
  p.onBackendRemoved!('a');
  assert.equal(p.trie.idOf('a'), undefined);
  assert.equal(p.trie.heldBy(p.trie.idOf('b')!), 10);
  p.trie.checkInvariants();
  assert.deepEqual(p.pick(requestInfo('x', 'y'), [], none, 0), []);
});
