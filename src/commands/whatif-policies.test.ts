// ARCHITECTURE.md's walkthrough: a policy registered in src/core/policies/index.ts runs in
// `whatif` when named with --policies, and is either in the default comparison (WHATIF_POLICIES)
// or left out of it with a reason (WHATIF_LEFT_OUT).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { policyNames } from '../core/policies/index.js';
import { runWhatifCommand, WHATIF_LEFT_OUT, WHATIF_POLICIES } from './whatif.js';

test('every registered policy is in WHATIF_POLICIES or WHATIF_LEFT_OUT, not both', () => {
  const registered = policyNames();
  const listed = [...WHATIF_POLICIES, ...WHATIF_LEFT_OUT.keys()];
  assert.equal(new Set(listed).size, listed.length, 'listed once');
  assert.deepEqual([...listed].sort(), [...registered].sort());
});

test('every registered policy runs in whatif when named with --policies', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-whatif-policies-'));
  const config = join(dir, 'llmlb.yaml');
  // pinned needs its backend: it runs as the config's own policy, with its params.
  writeFileSync(
    config,
    [
      'backends:',
      '  - { name: a, url: http://127.0.0.1:1, models: [m] }',
      '  - { name: b, url: http://127.0.0.1:2, models: [m] }',
      'policy: { name: pinned, params: { backend: a } }',
    ].join('\n'),
  );
  const trace = join(dir, 'mooncake.jsonl');
  writeFileSync(
    trace,
    Array.from({ length: 12 }, (_, i) =>
      JSON.stringify({ timestamp: i * 300, input_length: 300, output_length: 8, hash_ids: [i % 3] }),
    ).join('\n') + '\n',
  );
  const names = policyNames();
  const r = await runWhatifCommand({
    tracePath: trace,
    configPath: config,
    policies: names,
    threads: 2,
    charts: false,
    outDir: join(dir, 'out'),
    quiet: true,
  });
  // A policy with params is labelled with them: `pinned(backend="a")`.
  assert.deepEqual(
    r.policies.map((p) => p.policy.replace(/\(.*\)$/, '')),
    names,
  );
  for (const p of r.policies) assert.equal(p.completed, 12, p.policy);
});
