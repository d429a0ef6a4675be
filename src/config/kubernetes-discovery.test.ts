import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configIssues } from './testing.js';
import { parseConfig, type ParseOptions } from './load.js';

const opts: ParseOptions = { knownPolicies: ['least-connections', 'estimated-wait'], source: 't.yaml' };

test('discovery.kubernetes: backends may be left out; the template gets its defaults', () => {
  const c = parseConfig('discovery:\n  kubernetes:\n    inferencePool: llama\n', opts);
  assert.deepEqual(c.backends, []);
  assert.deepEqual(c.discovery.kubernetes, {
    inferencePool: 'llama',
    debounceMs: 250,
    backend: { api: 'openai', weight: 1, streamUsage: true },
  });
});

test('without discovery a backend is still required; bad discovery settings are named', () => {
  assert.deepEqual(
    configIssues('policy: estimated-wait\n', opts).map((i) => `${i.path}: ${i.message}`),
    ['backends: required'],
  );
  assert.deepEqual(
    configIssues('backends: []\n', opts).map((i) => `${i.path}: ${i.message}`),
    ['backends: at least one backend is required'],
  );
  const bad = configIssues(
    'discovery:\n  kubernetes:\n    inferencePool: Llama_Pool\n    apiServer: ftp://x\n    backend: { api: grpc }\n',
    opts,
  ).map((i) => i.path);
  assert.deepEqual(bad.sort(), [
    'discovery.kubernetes.apiServer',
    'discovery.kubernetes.backend.api',
    'discovery.kubernetes.inferencePool',
  ]);
});
