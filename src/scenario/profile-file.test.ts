import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseScenario } from './load.js';
import { loadProfileFile } from './profile-file.js';

const dir = mkdtempSync(join(tmpdir(), 'llmlb-profile-file-'));
const scenario = (profile: string): string => `name: t
durationS: 1
fleet: [{ name: a, profile: ${profile} }]
workload: { type: constant, rate: 1 }
policies: [round-robin]
`;
const file = (body: string): string => {
  const p = join(dir, `p${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(p, body);
  return p;
};

test('one engine-profile schema: a scenario profile and a profile file read the same fields alike', () => {
  const fields =
    '{ slots: 3, kvCapacityTokens: 9000, speed: 0.5, prefillMode: chunked, maxBatchedTokens: 512, ' +
    'lora: { maxLora: 2, swapS: 0.25, adapters: { prefix: ad-, count: 3 } } }';
  const fromScenario = parseScenario(scenario(fields), '<t>').fleet[0]!.profile;
  const fromFile = loadProfileFile(file(`profile: ${fields}\n`));
  assert.deepEqual(fromFile, fromScenario);
  assert.deepEqual(fromFile.lora, { maxLora: 2, swapS: 0.25, adapters: ['ad-0', 'ad-1', 'ad-2'] });
  assert.equal(fromFile.slots, 3);
});

test('one engine-profile schema: both reject the same bad field', () => {
  for (const bad of ['{ slots: 0 }', '{ slotz: 1 }', '{ lora: { maxLora: 0, swapS: 1 } }']) {
    assert.throws(() => parseScenario(scenario(bad), '<t>'), /profile/, bad);
    assert.throws(() => loadProfileFile(file(`profile: ${bad}\n`)), /profile\./, bad);
  }
});
