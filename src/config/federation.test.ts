import assert from 'node:assert/strict';
import { it } from 'node:test';
import { z } from 'zod';
import { checkFederationConfig, federationConfigKeys } from './federation.js';

const schema = z.strictObject(federationConfigKeys);

it('federation config: peers parse, bad URLs and duplicates are named', () => {
  const ok = schema.parse({
    region: 'us',
    peers: [{ name: 'eu', url: 'http://eu-lb:8080', region: 'eu' }],
    federation: {},
  });
  assert.equal(ok.federation!.tau, 2);
  assert.deepEqual(checkFederationConfig(ok), []);
  const bad = schema.safeParse({ peers: [{ name: 'eu', url: 'ftp://x', region: 'eu' }] });
  assert.equal(bad.success, false);
  assert.deepEqual(bad.error!.issues[0]!.path, ['peers', 0, 'url']);
  const problems = checkFederationConfig({
    region: 'us',
    peers: [
      { name: 'eu', region: 'eu' },
      { name: 'eu', region: 'us' },
    ],
  });
  assert.deepEqual(
    problems.map((p) => p.path.join('.')),
    ['peers.1.name', 'peers.1.region'],
  );
  assert.deepEqual(checkFederationConfig({ peers: [{ name: 'eu', region: 'eu' }] })[0]!.path, ['region']);
});
