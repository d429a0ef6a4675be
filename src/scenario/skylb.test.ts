import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createPolicy } from '../core/policies/index.js';
import { countTokens, flattenMessages } from '../engine/tokens.js';
import { policyLabel } from '../sim/simulator.js';
import type { ClientDriver, ScheduledRequest } from '../workloads/types.js';
import { loadScenario } from './load.js';

const SCENARIOS = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'scenarios');

/** Every request a driver sends when each takes `serviceS` (a toy server), in send order. */
function drive(driver: ClientDriver, untilS: number, serviceS = 20): ScheduledRequest[] {
  const sent: ScheduledRequest[] = [];
  let queue = driver.start().slice();
  while (queue.length > 0) {
    queue.sort((a, b) => a.at - b.at || a.request.id.localeCompare(b.request.id));
    const next = queue.shift()!;
    if (next.at >= untilS) continue;
    sent.push(next);
    queue = queue.concat(driver.onFinish(next.request.id, next.at + serviceS, true, ''));
  }
  return sent;
}

const LABELS = [
  'round-robin',
  'least-connections',
  'consistent-hash',
  'prefix-trie',
  'sglang-cache-aware',
  'round-robin+sp-o',
  'least-connections+sp-o',
  'consistent-hash+sp-o',
  'prefix-trie+sp-o',
  'round-robin+sp-p',
  'least-connections+sp-p',
  'consistent-hash+sp-p',
  'prefix-trie+sp-p',
  'sglang-cache-aware+sp-p',
  'prefix-trie+sp-p(waitForMatchMs=1000)',
];

describe('SkyLB scenarios (skylb-*)', () => {
  const cases = [
    { file: 'skylb-tot', replicas: 4, openers: 40 },
    { file: 'skylb-tot-12', replicas: 12, openers: 80 },
    { file: 'skylb-multiturn', replicas: 4, openers: 80 },
    { file: 'skylb-multiturn-12', replicas: 12, openers: 240 },
    { file: 'skylb-mixed-tree', replicas: 4, openers: 22 },
    { file: 'skylb-mixed-tree-12', replicas: 12, openers: 42 },
  ];
  for (const c of cases) {
    it(`${c.file}: ${c.replicas} L4 replicas, ${c.openers} clients, 15 policies with readable labels`, () => {
      const s = loadScenario(join(SCENARIOS, `${c.file}.yaml`));
      assert.equal(s.name, c.file);
      assert.equal(s.fleet.length, c.replicas);
      assert.equal(s.fleet.at(-1)!.name, `l4-${c.replicas - 1}`);
      // Every client opens with one request (a conversation's first turn, a tree's root).
      assert.equal(s.createDriver(s.seed).start().length, c.openers);
      // Labels: the push mode as a suffix; SP-O shows its fixed cap.
      assert.deepEqual(
        s.policies.map((p) => policyLabel(p).replace(/\(maxOutstanding=\d+\)$/, '')),
        LABELS,
      );
      for (const p of s.policies) assert.doesNotThrow(() => createPolicy(p, () => 0.5, s.scheduling));
      // Pending must be possible: the KV pool holds a few dozen requests, far fewer than slots.
      const prof = s.fleet[0]!.profile;
      assert.equal(prof.kvCapacityTokens, 24576);
      assert.equal(prof.pagedKv, true);
      assert.ok(prof.slots * 1000 > prof.kvCapacityTokens);
      assert.equal(prof.prefixCacheBlocks * prof.blockSize, prof.kvCapacityTokens);
    });
  }

  it('ToT: trees of 15 (branching 2, depth 4) keyed by question; mixed tree adds 85-request trees', () => {
    const tot = loadScenario(join(SCENARIOS, 'skylb-tot.yaml'));
    const sent = drive(tot.createDriver(1), 1e9).filter((r) => r.at < 250); // whole trees only
    const perTree = new Map<string, number>();
    for (const r of sent) perTree.set(r.request.sessionKey!, (perTree.get(r.request.sessionKey!) ?? 0) + 1);
    const complete = [...perTree.values()].filter((n) => n === 15).length;
    assert.ok(complete >= 40, `${complete} complete trees`);
    assert.ok([...perTree.values()].every((n) => n <= 15));
    // A leaf's prompt: shared ToT prompt + question + 3 thoughts + branch notes, ~0.8–1.5k tokens.
    const leaf = sent.find((r) => r.request.id.endsWith('-n14'))!.request;
    const leafTokens = countTokens(flattenMessages(leaf.messages!));
    assert.ok(leafTokens > 700 && leafTokens < 1500, `${leafTokens}`);

    const mixed = loadScenario(join(SCENARIOS, 'skylb-mixed-tree.yaml'));
    const all = drive(mixed.createDriver(1), 1e9);
    const big = new Map<string, number>();
    for (const r of all)
      if (r.request.id.startsWith('big'))
        big.set(r.request.sessionKey!, (big.get(r.request.sessionKey!) ?? 0) + 1);
    assert.ok([...big.values()].includes(85));
    assert.ok([...big.values()].every((n) => n <= 85));
  });

  it('multi-turn: keyed by user, several conversations each, turns in order', () => {
    const s = loadScenario(join(SCENARIOS, 'skylb-multiturn.yaml'));
    const sent = drive(s.createDriver(1), s.durationS);
    const mine = sent.filter((r) => r.request.sessionKey === 'c7').map((r) => r.request.id);
    const conversations = new Set(mine.map((id) => id.split('-')[1]));
    assert.ok(conversations.size >= 2, `${conversations.size} conversations`);
    for (const conv of conversations) {
      const turns = mine.filter((id) => id.split('-')[1] === conv).map((id) => Number(id.split('-')[2]));
      assert.deepEqual(
        turns,
        turns.map((_, i) => i + 1),
      );
    }
  });
});
