import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse } from 'yaml';
import { Scheduler } from '../scheduler.js';
import { createRng } from '../rng.js';
import type { BackendSpec, Decision, RequestInfo } from '../types.js';
import { createPolicy, policyNames, type PolicySpec } from './index.js';
import { endpointPickerConfigSchema } from './framework/endpoint-picker-config.js';

const spec = (name: string): BackendSpec => ({
  name,
  api: 'openai',
  models: ['m'],
  maxConcurrency: Infinity,
  weight: 1,
});
const req = (id: string, promptText = 'hi', sessionKey?: string): RequestInfo => ({
  id,
  model: 'm',
  api: 'openai',
  arrivedAt: 0,
  promptText,
  sessionKey,
});
const ok = { ok: true, dispatchedAt: 0, finishedAt: 1 };
const sent = (ds: Decision[]): string[] =>
  ds
    .filter((d) => d.type === 'dispatch')
    .map((d) => `${d.request.id}->${(d as { backend: string }).backend}`);
function sched(policy: PolicySpec | string, names = ['a', 'b']): Scheduler {
  const s = new Scheduler({ policy: createPolicy(policy, createRng(1)) });
  for (const n of names) s.addBackend(spec(n));
  return s;
}

test('prefix-trie, consistent-hash and sglang-cache-aware are built-ins; every push mode builds', () => {
  for (const name of [
    'prefix-trie',
    'consistent-hash',
    'sglang-cache-aware',
    'round-robin',
    'least-connections',
  ]) {
    assert.ok(policyNames().includes(name));
    for (const push of ['blind', 'sp-o', 'sp-p']) createPolicy({ name, params: { push } }, createRng(1));
  }
  assert.equal(
    createPolicy({ name: 'prefix-trie', params: { push: 'sp-p' } }, createRng(1)).traits?.metricsIntervalMs,
    50,
  );
  assert.equal(
    createPolicy({ name: 'round-robin', params: { push: 'sp-p', probeIntervalMs: 20 } }, createRng(1)).traits
      ?.metricsIntervalMs,
    20,
  );
  assert.equal(createPolicy('consistent-hash', createRng(1)).traits?.metricsIntervalMs, undefined);
});

test('bad push parameters are reported with the policy name', () => {
  const bad = (name: string, params: Record<string, unknown>, re: RegExp) =>
    assert.throws(() => createPolicy({ name, params }, createRng(1)), re);
  bad('prefix-trie', { push: 'sp-x' }, /policy 'prefix-trie'.*push/);
  bad('prefix-trie', { push: 'constructor' }, /push: must be one of/);
  bad('prefix-trie', { push: 'sp-p', maxOutstanding: 3 }, /maxOutstanding: applies to another push mode/);
  bad('consistent-hash', { maxWaiting: 1 }, /maxWaiting: applies to another push mode, not 'blind'/);
  bad('round-robin', { push: 'sp-o', chunkChars: 3 }, /round-robin.*chunkChars/);
  bad('least-connections', { push: 'sp-o', maxOutstanding: 0 }, /least-connections.*maxOutstanding/);
  bad('prefix-trie', { minMatchRatio: -1 }, /prefix-trie.*minMatchRatio/);
  bad('consistent-hash', { push: 'sp-o', virtualNodes: 'many' }, /consistent-hash.*virtualNodes/);
  bad('sglang-cache-aware', { push: 'sp-p', cacheThreshold: 2 }, /sglang-cache-aware.*cacheThreshold/);
  bad('sglang-cache-aware', { minMatchRatio: 0.5 }, /sglang-cache-aware.*minMatchRatio/);
  // Existing built-ins still refuse stray parameters.
  bad('round-robin', { foo: 1 }, /foo/);
});

test('SP-O holds a request in the router queue until a backend has a free slot', () => {
  const s = sched({ name: 'least-connections', params: { push: 'sp-o', maxOutstanding: 1 } });
  assert.deepEqual(sent(s.submit(req('1'), 0)), ['1->a']);
  assert.deepEqual(sent(s.submit(req('2'), 0)), ['2->b']);
  assert.deepEqual(s.submit(req('3'), 0), []);
  assert.equal(s.queueLength, 1);
  assert.deepEqual(sent(s.complete('2', ok, 5)), ['3->b']);
});

test('SP-P pushes only where the engine has nothing pending, corrected by the router’s own pushes', () => {
  const s = sched({ name: 'round-robin', params: { push: 'sp-p' } });
  for (const n of ['a', 'b']) s.setMetrics(n, { running: 3, waiting: 0, kvUsage: 0.2, at: 0 });
  assert.deepEqual(sent(s.submit(req('1'), 1)), ['1->a']);
  assert.deepEqual(sent(s.submit(req('2'), 2)), ['2->b']);
  // Both now count one push as possibly waiting: the third waits in the router queue.
  assert.deepEqual(s.submit(req('3'), 3), []);
  // A probe shows a admitted it into its batch: pump releases the held request there.
  s.setMetrics('a', { running: 4, waiting: 0, kvUsage: 0.3, at: 50 });
  assert.deepEqual(sent(s.pump(50)), ['3->a']);
  // b reports a backlog: nothing goes there even after a push of its own finishes.
  s.setMetrics('b', { running: 4, waiting: 2, kvUsage: 0.9, at: 50 });
  assert.deepEqual(s.submit(req('4'), 51), []);
  assert.deepEqual(sent(s.complete('2', ok, 60)), []);
  assert.deepEqual(sent(s.complete('1', ok, 61)), ['4->a']);
});

test('the trie learns from dispatches through the scheduler and forgets removed backends', () => {
  const s = sched('prefix-trie', ['a', 'b', 'c']);
  const convo = 'system: be helpful. user: tell me about tries and radix trees please. '.repeat(3);
  const [first] = sent(s.submit(req('t1', convo), 0));
  const home = first!.split('->')[1]!;
  // Load elsewhere is lower, but the prefix keeps the next turn home.
  assert.deepEqual(sent(s.submit(req('t2', convo + 'assistant: sure. user: more'), 1)), [`t2->${home}`]);
  s.removeBackend(home, 2);
  const next = sent(s.submit(req('t3', convo + 'again'), 3))[0]!;
  assert.notEqual(next.split('->')[1], home);
});

test('consistent-hash through the scheduler: a session sticks, and walks on while its home is held by SP-O', () => {
  const s = sched({ name: 'consistent-hash', params: { push: 'sp-o', maxOutstanding: 1 } }, [
    'a',
    'b',
    'c',
    'd',
  ]);
  const home = sent(s.submit(req('1', 'x', 'alice'), 0))[0]!.split('->')[1]!;
  const stand = sent(s.submit(req('2', 'x', 'alice'), 1))[0]!.split('->')[1]!;
  assert.notEqual(stand, home);
  s.complete('1', ok, 2);
  s.complete('2', ok, 2);
  assert.deepEqual(sent(s.submit(req('3', 'x', 'alice'), 3)), [`3->${home}`]);
});

test('the new filters and pickers are usable as plugin types in a scheduling profile', () => {
  const cfg = endpointPickerConfigSchema.parse(
    parse(`
plugins:
  - type: pending-filter
    parameters: { probeIntervalMs: 25 }
  - type: outstanding-filter
    parameters: { maxOutstanding: 8 }
  - type: prefix-trie-picker
    parameters: { chunkChars: 16, minMatchRatio: 0.3 }
  - type: consistent-hash-picker
schedulingProfiles:
  - name: skylb
    plugins: [{ pluginRef: pending-filter }, { pluginRef: prefix-trie-picker }]
  - name: skylb-ch
    plugins: [{ pluginRef: outstanding-filter }, { pluginRef: consistent-hash-picker }]
`),
  );
  const p = createPolicy('skylb', createRng(1), cfg);
  assert.equal(p.traits?.metricsIntervalMs, 25);
  const s = new Scheduler({ policy: p });
  s.addBackend(spec('a'));
  s.addBackend(spec('b'));
  const text = 'z'.repeat(100);
  const home = sent(s.submit(req('1', text), 0))[0]!.split('->')[1]!;
  s.complete('1', ok, 1);
  assert.deepEqual(sent(s.submit(req('2', text + 'more'), 2)), [`2->${home}`]);
  const ch = createPolicy('skylb-ch', createRng(1), cfg);
  assert.equal(ch.traits?.metricsIntervalMs, undefined);
});
