import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy, policyNames } from './index.js';
import { createRng } from '../rng.js';
import { HOLD } from '../types.js';
import type { BackendView, Policy } from '../types.js';
import { backendView, requestInfo, chosen } from '../testing.js';

const view = backendView;
const req = requestInfo('r');

function picks(policy: string, backends: BackendView[], n: number): string[] {
  const p = createPolicy(policy, createRng(7));
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(chosen(p.pick(req, backends, i))?.name ?? '-');
  return out;
}

test('round-robin rotates and skips non-candidates', () => {
  const all = [view('a', 0), view('b', 1), view('c', 2)];
  assert.deepEqual(picks('round-robin', all, 4), ['a', 'b', 'c', 'a']);
  const p = createPolicy('round-robin', createRng(1));
  assert.equal(chosen(p.pick(req, all, 0))?.name, 'a');
  assert.equal(chosen(p.pick(req, [all[0]!, all[2]!], 0))?.name, 'c');
  assert.equal(chosen(p.pick(req, all, 0))?.name, 'a');
});

test('least-connections picks the fewest in flight, ties round-robin', () => {
  const bs = [view('a', 0, { inFlight: 2 }), view('b', 1, { inFlight: 1 }), view('c', 2, { inFlight: 1 })];
  assert.deepEqual(picks('least-connections', bs, 4), ['b', 'c', 'b', 'c']);
});

test('weighted-round-robin follows the weights smoothly', () => {
  const bs = [view('a', 0, { weight: 5 }), view('b', 1), view('c', 2)];
  const seq = picks('weighted-round-robin', bs, 7);
  assert.deepEqual(seq, ['a', 'a', 'b', 'a', 'c', 'a', 'a']);
});

test('random is seeded and covers all candidates', () => {
  const bs = [view('a', 0), view('b', 1), view('c', 2)];
  const x = picks('random', bs, 300);
  assert.deepEqual(x, picks('random', bs, 300));
  for (const n of ['a', 'b', 'c']) assert.ok(x.filter((v) => v === n).length > 60);
});

test('unknown policy names are rejected with the known list', () => {
  assert.throws(() => createPolicy('nope', Math.random), /unknown policy 'nope'.*round-robin/);
  assert.ok(policyNames().includes('least-connections'));
});

test('pinned sends everything to its backend and holds while it is busy', () => {
  const p = createPolicy({ name: 'pinned', params: { backend: 'b' } }, createRng(1));
  assert.equal(chosen(p.pick(req, [view('a', 0), view('b', 1)], 0))?.name, 'b');
  assert.equal(p.pick(req, [view('a', 0)], 0), HOLD.retry);
  assert.throws(() => createPolicy('pinned', createRng(1)), /pinned.*backend/);
});

test('readsMetrics: false only for profiles that read no engine metrics and never hold', () => {
  const reads = (spec: Parameters<typeof createPolicy>[0]): boolean | undefined =>
    quietOf(createPolicy(spec, createRng(1)));
  for (const name of [
    'round-robin',
    'least-connections',
    'random',
    'weighted-round-robin',
    'prefix-trie',
    'sglang-cache-aware',
    'consistent-hash',
    'ollama-router',
  ])
    assert.equal(reads(name), false, name);
  // A push filter may hold (and SP-P reads metrics); whole-decision policies may read them; a
  // prefix trie waiting for its match holds.
  assert.equal(reads({ name: 'round-robin', params: { push: 'sp-o' } }), true);
  assert.equal(reads({ name: 'round-robin', params: { push: 'sp-p' } }), true);
  assert.equal(reads({ name: 'prefix-trie', params: { push: 'sp-o' } }), true);
  assert.equal(reads({ name: 'prefix-trie', params: { waitForMatchMs: 100 } }), true);
  for (const name of ['estimated-wait', 'jsq', 'min-min']) assert.equal(reads(name), true, name);
});

test("holdsIgnoreMetrics: SP-O holds on the router's own counts, SP-P on engine metrics", () => {
  const ignores = (spec: Parameters<typeof createPolicy>[0]): boolean | undefined =>
    createPolicy(spec, createRng(1)).traits?.holdsIgnoreMetrics;
  for (const name of ['round-robin', 'prefix-trie', 'sglang-cache-aware', 'consistent-hash'])
    assert.equal(ignores({ name, params: { push: 'sp-o' } }), true, name);
  for (const name of ['round-robin', 'prefix-trie', 'sglang-cache-aware'])
    assert.equal(ignores({ name, params: { push: 'sp-p' } }), false, name);
});

/** false when it reads no engine metrics and never holds (a host may skip probes); else true. */
function quietOf(p: Policy): boolean {
  return !(p.traits?.readsMetrics === false && p.traits.holds === false);
}
