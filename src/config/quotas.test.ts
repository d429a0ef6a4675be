import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig, type ConfigIssue, type ParseOptions } from './load.js';
import { configIssues } from './testing.js';

const opts: ParseOptions = { knownPolicies: ['estimated-wait'], source: 't.yaml' };
const base = 'backends:\n  - name: a\n    url: http://127.0.0.1:11434\n';

const issues = (text: string): ConfigIssue[] => configIssues(text, opts);

test('state, quotas and admission keys (design §2) parse with their defaults', () => {
  const c = parseConfig(
    `${base}state: { redis: "redis://127.0.0.1:6379/0" }\n` +
      'quotas:\n  models:\n    m1: { weight: 2, maxConcurrent: 4, tokensPerMinute: 60000, requestsPerMinute: 120 }\n' +
      '    m2: { maxConcurrent: 1, tokensPerMinute: 1000, requestsPerMinute: 10 }\n' +
      'admission: { leaseTtlMs: 5000 }\n',
    opts,
  );
  assert.deepEqual(c.state, {
    redis: 'redis://127.0.0.1:6379/0',
    keyPrefix: 'llmlb:{quota}:',
    failOpen: false,
    commandTimeoutMs: 500,
  });
  assert.deepEqual(c.quotas?.models.m1, {
    weight: 2,
    maxConcurrent: 4,
    tokensPerMinute: 60000,
    requestsPerMinute: 120,
  });
  assert.equal(c.quotas?.models.m2?.weight, 1);
  assert.deepEqual(c.admission, { leaseTtlMs: 5000, reclaimIntervalMs: 1000, tickMs: 100 });
  const plain = parseConfig(base, opts);
  assert.equal(plain.state, undefined);
  assert.equal(plain.quotas, undefined);
  assert.deepEqual(plain.admission, { leaseTtlMs: 30000, reclaimIntervalMs: 1000, tickMs: 100 });
});

test('quota typos, bad values and a non-Redis URL name the field', () => {
  const bad = issues(
    `${base}state: { redis: "http://x" }\n` +
      'quotas:\n  models:\n    m1: { maxConcurent: 4, tokensPerMinute: 0, requestsPerMinute: 1.5 }\n' +
      'admission: { leaseTtl: 1 }\n',
  );
  const paths = bad.map((i) => i.path);
  for (const p of [
    'state.redis',
    'quotas.models.m1.maxConcurent',
    'quotas.models.m1.maxConcurrent',
    'quotas.models.m1.tokensPerMinute',
    'quotas.models.m1.requestsPerMinute',
    'admission.leaseTtl',
  ]) {
    assert.ok(paths.includes(p), `${p} missing from ${paths.join(', ')}`);
  }
});
