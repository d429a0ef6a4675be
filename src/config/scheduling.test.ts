import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy, policyNames } from '../core/policies/index.js';
import { ProfilePolicy } from '../core/policies/framework/profile.js';
import { loadConfigFile, parseConfig, type ConfigIssue, type ParseOptions } from './load.js';
import { configIssues } from './testing.js';

const opts: ParseOptions = {
  knownPolicies: policyNames(),
  validatePolicy: (spec, scheduling) => void createPolicy(spec, () => 0.5, scheduling),
  source: 't.yaml',
};

const issuesOf = (text: string): ConfigIssue[] => configIssues(text, opts);

test("Heimdall's Heimdall config loads as written and runs as the policy", () => {
  const c = loadConfigFile('examples/heimdall.yaml', opts);
  assert.equal(c.policy.name, 'default');
  const p = createPolicy(c.policy, () => 0.5, c.scheduling);
  assert.ok(p instanceof ProfilePolicy);
  assert.deepEqual(p.currentWeights(), {
    'queue-scorer': 1,
    'load-aware-scorer': 1,
    'active-request-scorer': 1,
    'session-affinity-scorer': 1,
    'no-hit-lru-scorer': 1,
  });
});

test('the adaptive example loads with its dynamic weights', () => {
  const c = loadConfigFile('examples/adaptive.yaml', opts);
  const p = createPolicy(c.policy, () => 0.5, c.scheduling) as ProfilePolicy;
  assert.equal(p.currentWeights()['prefix-cache-scorer'], 3);
});

const base = `
backends: [{ name: a, url: 'http://127.0.0.1:1', models: [m] }]
policy: p
scheduling:
  plugins:
    - type: queue-scorer
    - type: max-score-picker
  schedulingProfiles:
    - name: p
      plugins:
        - pluginRef: queue-scorer
`;

test('a profile without a picker gets max-score-picker; weights default to 1', () => {
  const c = parseConfig(base, opts);
  const p = createPolicy(c.policy, () => 0.5, c.scheduling) as ProfilePolicy;
  assert.deepEqual(p.currentWeights(), { 'queue-scorer': 1 });
});

test('wiring mistakes are reported with the field path and line', () => {
  const unknownType = issuesOf(base.replace('type: queue-scorer', 'type: qeue-scorer'));
  assert.equal(unknownType[0]!.path, 'scheduling.plugins[0].type');
  assert.match(unknownType[0]!.message, /unknown plugin type 'qeue-scorer'.*queue-scorer/);
  assert.equal(unknownType[0]!.line, 6);

  const badRef = issuesOf(base.replace('pluginRef: queue-scorer', 'pluginRef: nope'));
  assert.equal(badRef[0]!.path, 'scheduling.schedulingProfiles[0].plugins[0].pluginRef');
  assert.match(badRef[0]!.message, /no plugin named 'nope'/);

  const badParam = issuesOf(
    base.replace('- type: queue-scorer', '- type: load-aware-scorer\n      parameters: { threshold: -1 }'),
  );
  assert.equal(badParam[0]!.path, 'scheduling.plugins[0].parameters');
  assert.match(badParam[0]!.message, /threshold/);

  const weightOnPicker = issuesOf(
    base.replace(
      '        - pluginRef: queue-scorer',
      '        - pluginRef: max-score-picker\n          weight: 2',
    ),
  );
  assert.match(weightOnPicker[0]!.message, /only scorers take a weight/);

  const unknownKey = issuesOf(
    base.replace('  schedulingProfiles:', '  schedulingProfile: []\n  schedulingProfiles:'),
  );
  assert.ok(
    unknownKey.some((i) => i.path.startsWith('scheduling') && /unrecognized|unknown/i.test(i.message)),
  );

  const ruleOnStranger = issuesOf(
    base + '      dynamicWeights: [{ signal: maxInFlight, above: 3, set: { load-aware-scorer: 2 } }]\n',
  );
  assert.match(ruleOnStranger[0]!.message, /'load-aware-scorer' is not a scorer of profile 'p'/);

  const unknownPolicy = issuesOf(base.replace('policy: p', 'policy: q'));
  assert.equal(unknownPolicy[0]!.path, 'policy');
  assert.match(unknownPolicy[0]!.message, /unknown policy 'q'.*estimated-wait.*, p\)/);

  const clash = issuesOf(
    base.replace('- name: p', '- name: round-robin').replace('policy: p', 'policy: round-robin'),
  );
  assert.match(clash[0]!.message, /built-in policy's name/);
});
