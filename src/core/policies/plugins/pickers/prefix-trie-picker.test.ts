import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, listOf } from '../../../testing.js';
import type { BackendView } from '../../../types.js';
import type { Picker } from '../../framework/plugin.js';
import type { PrefixTrieDecision } from './prefix-trie-picker.js';

type TriePicker = Picker & { lastDecision(): PrefixTrieDecision | undefined };
const make = (params: Record<string, unknown> = {}): TriePicker =>
  makePlugin('picker', 'prefix-trie-picker', { chunkChars: 4, ...params }) as TriePicker;
const none = new Float64Array(8);
let ids = 0;
/** Pick, then dispatch to the chosen backend as the scheduler would. */
function route(p: Picker, text: string, bs: readonly BackendView[]): string {
  const req = requestInfo(`q${ids++}`, text);
  const b = listOf(p.pick(req, bs, none, 0))[0]!;
  p.onDispatch!(req, b, 0);
  return b.name;
}
const SYS = 'sys:'.repeat(4); // 16 chars shared by everyone

test('requests sharing a long prefix follow the backend that served it', () => {
  const p = make();
  const bs = [backendView('a', 0), backendView('b', 1), backendView('c', 2)];
  const first = route(p, SYS + 'user one asks' + 'x'.repeat(40), bs);
  // A follow-up turn (history + more) goes to the same backend.
  assert.equal(route(p, SYS + 'user one asks' + 'x'.repeat(40) + 'and more', bs), first);
  assert.equal(p.lastDecision()!.reason, 'prefix');
  assert.ok(p.lastDecision()!.matchedChars >= 52);
});

test('a short match (only the shared system prompt) routes by load: no hot spot', () => {
  const p = make({ minMatchRatio: 0.5 });
  const loads = [0, 0, 0];
  const bs = () => loads.map((l, i) => backendView('abc'[i]!, i, { inFlight: l }));
  const seen = new Set<string>();
  for (let u = 0; u < 6; u++) {
    const name = route(p, SYS + `user ${u} has a different question here`, bs());
    loads['abc'.indexOf(name)]!++;
    seen.add(name);
  }
  assert.equal(seen.size, 3, 'new conversations spread over all backends');
  assert.equal(p.lastDecision()!.reason, 'short-match');
  assert.deepEqual(loads, [2, 2, 2]);
});

test('an overloaded match routes by load; a loaded-but-not-overloaded one keeps locality', () => {
  const p = make({ overloadMargin: 2, overloadFactor: 1.5 });
  const text = 'q'.repeat(64);
  route(p, text, [backendView('a', 0)]);
  const busy = [
    backendView('a', 0, { inFlight: 9 }),
    backendView('b', 1, { inFlight: 1 }),
    backendView('c', 2),
  ];
  assert.equal(route(p, text, busy), 'c');
  assert.equal(p.lastDecision()!.reason, 'overloaded');
  // Now a and c hold it; a little busier than the rest is fine.
  const mild = [
    backendView('a', 0, { inFlight: 2 }),
    backendView('b', 1, { inFlight: 1 }),
    backendView('c', 2, { inFlight: 3 }),
  ];
  assert.equal(route(p, text, mild), 'a');
  assert.equal(p.lastDecision()!.reason, 'prefix');
});

test('among backends holding the longest match, the least loaded wins', () => {
  const p = make();
  const text = 'shared-prefix-'.repeat(5);
  route(p, text, [backendView('a', 0)]);
  route(p, text, [backendView('b', 1)]);
  const bs = [
    backendView('a', 0, { inFlight: 3 }),
    backendView('b', 1, { inFlight: 1 }),
    backendView('c', 2),
  ];
  assert.equal(listOf(p.pick(requestInfo('z', text + 'tail'), bs, none, 0))[0]!.name, 'b');
});

test('only available candidates match: a held backend is skipped for the next longest prefix', () => {
  const p = make();
  const long = 'aaaabbbbccccdddd'.repeat(2);
  route(p, long, [backendView('a', 0)]);
  route(p, long.slice(0, 20), [backendView('b', 1)]);
  // a is not a candidate (filtered out as busy): b has 20 of 32 chars.
  const got = listOf(p.pick(requestInfo('z', long), [backendView('b', 1), backendView('c', 2)], none, 0));
  assert.equal(got[0]!.name, 'b');
  assert.equal(p.lastDecision()!.matchedChars, 20);
});

test('a removed backend is forgotten', () => {
  const p = make() as TriePicker & { trie: { size: number } };
  const text = 'z'.repeat(40);
  route(p, text, [backendView('a', 0)]);
  assert.equal(p.trie.size, 10);
  p.onBackendRemoved!('a');
  assert.equal(p.trie.size, 0);
  p.pick(requestInfo('y', text), [backendView('a', 0), backendView('b', 1)], none, 0);
  assert.equal(p.lastDecision()!.matchedChars, 0);
});

test('prompts shorter than a chunk route by load; empty candidates hold', () => {
  const p = make();
  assert.equal(route(p, 'hi', [backendView('a', 0, { inFlight: 1 }), backendView('b', 1)]), 'b');
  assert.deepEqual(p.pick(requestInfo('e', 'hello world'), [], none, 0), []);
});

test('prefix-trie-picker validates its parameters', () => {
  assert.throws(() => make({ minMatchRatio: 2 }), /minMatchRatio/);
  assert.throws(() => make({ overloadFactor: 0.5 }), /overloadFactor/);
  assert.throws(() => make({ chunk: 3 }), /chunk/);
});

test('waitForMatchMs holds a request for a busy backend with a longer match, for a bounded time', () => {
  const p = make({ waitForMatchMs: 1000 });
  const text = 'conversation history '.repeat(4);
  route(p, text, [backendView('a', 0)]);
  // a is filtered out (busy): b and c have nothing of it. Held while younger than 1 s…
  const others = [backendView('b', 1), backendView('c', 2)];
  const r = requestInfo('h', text + 'next turn', { arrivedAt: 100 });
  assert.deepEqual(listOf(p.pick(r, others, none, 600)), []);
  assert.equal(p.lastDecision()!.reason, 'wait-for-match');
  // …then it goes by load rather than wait longer.
  assert.equal(listOf(p.pick(r, others, none, 1100))[0]!.name, 'b');
  // Its home available again: no wait.
  assert.equal(listOf(p.pick(r, [backendView('a', 0), ...others], none, 600))[0]!.name, 'a');
  // Without the option the request never waits.
  const q = make();
  route(q, text, [backendView('a', 0)]);
  assert.equal(listOf(q.pick(r, others, none, 600)).length, 1);
});

test('trie ids reused after a removal are not mistaken for the old backend', () => {
  const p = make();
  const t1 = 'first prefix text '.repeat(4);
  const t2 = 'second prefix text '.repeat(4);
  route(p, t1, [backendView('a', 0), backendView('c', 2)]);
  p.onBackendRemoved!('a');
  route(p, t2, [backendView('b', 1)]); // b takes the freed id
  // a is back (same registration index): it holds nothing, b is not a candidate.
  const got = listOf(
    p.pick(requestInfo('x', t2), [backendView('a', 0, { inFlight: 1 }), backendView('c', 2)], none, 0),
  );
  assert.equal(p.lastDecision()!.reason, 'short-match');
  assert.equal(got[0]!.name, 'c');
  const back = listOf(
    p.pick(requestInfo('y', t2), [backendView('a', 0), backendView('b', 1, { inFlight: 1 })], none, 0),
  );
  assert.equal(back[0]!.name, 'b');
  assert.equal(p.lastDecision()!.reason, 'prefix');
});

test("another router's by-load push moves the load-tie order as its own would; a prefix push does not", () => {
  // Issue #31: routers that apply each other's pushes break load ties alike (as one router does).
  const p = make({ minMatchRatio: 0.5 });
  const bs = [backendView('a', 0), backendView('b', 1), backendView('c', 2)];
  const long = 'L'.repeat(64);
  route(p, long, bs); // its own tie pick: a (cursor past a)
  // Another router pushed a new conversation (a short match here: by load) to b: next tie is c.
  p.onDispatch!(requestInfo('other-1', SYS + 'someone else entirely, a new question'), bs[1]!, 0);
  assert.equal(route(p, SYS + 'a third user with another question', bs), 'c');
  // Another router pushed a follow-up of `long` (a prefix match here) to b: the order stays.
  p.onDispatch!(requestInfo('other-2', long + 'and more'), bs[1]!, 0);
  assert.equal(route(p, SYS + 'a fourth user, yet another question', bs), 'a');
});
