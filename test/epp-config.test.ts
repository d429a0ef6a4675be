import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadRouterConfig } from '../src/commands/serve.js';
import { parseConfig } from '../src/config/load.js';
import { policyCheck } from '../src/commands/policy-check.js';

test('examples/epp.yaml loads as written: epp ports and fallbacks', () => {
  const s = loadRouterConfig('examples/epp.yaml', {});
  assert.deepEqual(s.epp, { port: 9002, healthPort: 9003, fallbacks: 2 });
  assert.equal(s.server.port, 9090);
});

test('epp: defaults, and a wrong key or port is refused naming it', () => {
  const base = 'backends: [{ name: a, url: "http://127.0.0.1:1", models: [m] }]\n';
  assert.deepEqual(parseConfig(`${base}epp: {}\n`, policyCheck).epp, {
    port: 9002,
    healthPort: 9003,
    fallbacks: 2,
  });
  assert.equal(parseConfig(base, policyCheck).epp, undefined);
  assert.throws(() => parseConfig(`${base}epp: { prot: 1 }\n`, policyCheck), /epp/);
  assert.throws(() => parseConfig(`${base}epp: { port: 70000 }\n`, policyCheck), /epp\.port/);
});
