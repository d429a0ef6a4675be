import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { loadScenario, parseScenario } from './load.js';

const shipped = fileURLToPath(new URL('../../scenarios/lora-30-adapters.yaml', import.meta.url));

test('lora scenario: adapters expand from { prefix, count }, join each backend models, and are requested Zipf-wise', () => {
  const s = loadScenario(shipped);
  assert.equal(s.fleet.length, 4);
  for (const b of s.fleet) {
    assert.equal(b.adapters?.length, 30);
    assert.equal(b.adapters![0], 'sql-lora-00');
    assert.deepEqual(b.models, ['meta-llama/Llama-3.1-8B', ...b.adapters!]);
    assert.deepEqual(b.profile.lora?.maxLora, 4);
  }
  const counts = new Map<string, number>();
  for (const r of s.createDriver(1).start())
    counts.set(r.request.model, (counts.get(r.request.model) ?? 0) + 1);
  assert.ok([...counts.keys()].every((m) => m.startsWith('sql-lora-')));
  const top = counts.get('sql-lora-00')!;
  const last = counts.get('sql-lora-29') ?? 0;
  // Zipf s = 1 over 30: the first takes 1/H(30) ≈ 25 % of requests, the last ≈ 0.8 %.
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  assert.ok(Math.abs(top / total - 0.25) < 0.03, `top share ${top / total}`);
  assert.ok(last < top / 10);
});

test('lora scenario: a lora section is validated', () => {
  const text = (lora: string): string => `name: t
durationS: 1
defaults: { profile: { lora: ${lora} } }
fleet: [{ name: a }]
workload: { type: constant, rate: 1 }
policies: [round-robin]
`;
  assert.throws(() => parseScenario(text('{ maxLora: 0, swapS: 1 }'), '<t>'), /lora\.maxLora/);
  assert.throws(() => parseScenario(text('{ maxLora: 1, swap: 1 }'), '<t>'), /lora/);
  const s = parseScenario(text('{ maxLora: 2, swapS: 0.1, adapters: [x, y] }'), '<t>');
  assert.deepEqual(s.fleet[0]!.models, ['llama3', 'x', 'y']);
  const plain = parseScenario(text('{ maxLora: 2, swapS: 0.1 }'), '<t>');
  assert.equal(plain.fleet[0]!.adapters, undefined);
});
