import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig, type ParseOptions } from './load.js';
import { configIssues } from './testing.js';

const opts: ParseOptions = { knownPolicies: ['least-connections', 'estimated-wait'], source: 't.yaml' };
const base = 'backends:\n  - name: a\n    url: http://127.0.0.1:11434\n';

test('state: outages fail closed by default, with a 500 ms command timeout', () => {
  const c = parseConfig(`${base}state: { redis: 'redis://127.0.0.1:6379/0' }\n`, opts);
  assert.deepEqual(c.state, {
    redis: 'redis://127.0.0.1:6379/0',
    keyPrefix: 'llmlb:{quota}:',
    failOpen: false,
    commandTimeoutMs: 500,
  });
  const open = parseConfig(
    `${base}state: { redis: 'redis://h:1/0', failOpen: true, commandTimeoutMs: 200 }\n`,
    opts,
  );
  assert.equal(open.state?.failOpen, true);
  assert.equal(open.state?.commandTimeoutMs, 200);
});

test('state: a non-boolean failOpen or an out-of-range timeout is refused with its path', () => {
  for (const bad of ['failOpen: "yes"', 'commandTimeoutMs: 0', 'commandTimeoutMs: 1.5']) {
    const found = configIssues(`${base}state: { redis: 'redis://h:1/0', ${bad} }\n`, opts);
    assert.equal(found.length, 1, bad);
    assert.match(found[0]!.path, /^state\.(failOpen|commandTimeoutMs)$/);
  }
});
