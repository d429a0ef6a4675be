import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LineCounter, parseDocument } from 'yaml';
import { parseConfig, type ConfigIssue } from './load.js';
import { configIssues } from './testing.js';
import { parsePolicySpec, PolicySpecError, yamlPosition } from './policy-spec.js';
import { parseScenario, ScenarioError } from '../scenario/load.js';

const fails = (raw: unknown): { message: string; path: readonly (string | number)[] } => {
  try {
    parsePolicySpec(raw);
  } catch (err) {
    assert.ok(err instanceof PolicySpecError, String(err));
    return { message: err.message, path: err.path };
  }
  assert.fail(`accepted ${JSON.stringify(raw)}`);
};

test('a policy is a name, a name beside its parameters, or a name with params', () => {
  assert.deepEqual(parsePolicySpec('round-robin'), { name: 'round-robin', params: {} });
  assert.deepEqual(parsePolicySpec({ name: 'estimated-wait', alpha: 0.3 }), {
    name: 'estimated-wait',
    params: { alpha: 0.3 },
  });
  assert.deepEqual(parsePolicySpec({ name: 'estimated-wait', params: { alpha: 0.3 } }), {
    name: 'estimated-wait',
    params: { alpha: 0.3 },
  });
  // A parameter named like an Object.prototype key is just a parameter.
  assert.deepEqual(parsePolicySpec({ name: 'p', toString: 1 }).params, { toString: 1 });
});

test('bad specs say where and what, in the same words everywhere', () => {
  assert.match(fails('').message, /policy name or an object/);
  assert.match(fails(42).message, /policy name or an object/);
  assert.match(fails(['a']).message, /policy name or an object/);
  assert.match(fails({ alpha: 1 }).message, /policy name or an object/);
  assert.deepEqual(fails({ name: 3 }), { message: 'must be a non-empty string', path: ['name'] });
  assert.deepEqual(fails({ name: 'x', params: 3 }).path, ['params']);
  const both = fails({ name: 'x', params: { a: 1 }, b: 2 });
  assert.deepEqual(both.path, ['b']);
  assert.match(both.message, /^unknown key/);
});

const minimal = 'backends:\n  - name: a\n    url: http://127.0.0.1:11434\n';
const opts = { knownPolicies: ['estimated-wait', 'round-robin'], source: 't.yaml' };
const scenario = (policy: string): string =>
  `name: t\ndurationS: 10\nfleet:\n  - name: a\nworkload: { type: constant, rate: 1 }\npolicies:\n  - ${policy}\n`;
const scenarioError = (text: string): ScenarioError => {
  try {
    parseScenario(text, 's.yaml');
  } catch (err) {
    assert.ok(err instanceof ScenarioError, String(err));
    return err;
  }
  assert.fail('accepted');
};

test('config and scenario accept the same shapes and report the same problem the same way', () => {
  const nested = '{ name: estimated-wait, params: { alpha: 0.3 } }';
  // {name, params} was accepted in a scenario and rejected in a config.
  assert.deepEqual(parseConfig(`${minimal}policy: ${nested}\n`, opts).policy, {
    name: 'estimated-wait',
    params: { alpha: 0.3 },
  });
  assert.deepEqual(parseScenario(scenario(nested), 's.yaml').policies, [
    { name: 'estimated-wait', params: { alpha: 0.3 } },
  ]);
  const bad = '{ name: estimated-wait, params: { alpha: 0.3 }, beta: 1 }';
  const c: ConfigIssue[] = configIssues(`${minimal}policy: ${bad}\n`, opts);
  assert.deepEqual(
    c.map((i) => [i.path, i.line]),
    [['policy.beta', 4]],
  );
  assert.match(c[0]!.message, /^unknown key/);
  const s = scenarioError(scenario(bad));
  assert.equal(s.field, 'policies[0].beta');
  assert.equal(s.line, 7);
  assert.match(s.message, /policies\[0\]\.beta: unknown key/);
  // An unknown top-level key: the same words in both.
  assert.equal(configIssues(`${minimal}bogus: 1\n`, opts)[0]?.message, 'unknown key');
  assert.match(scenarioError(scenario('round-robin') + 'bogus: 1\n').message, /bogus: unknown key/);
});

test('yamlPosition points at a key that is there, else at the deepest part present', () => {
  const lc = new LineCounter();
  const doc = parseDocument('a:\n  b: 1\n  c:\n    - x\n    - y\n', { lineCounter: lc });
  assert.deepEqual(yamlPosition(doc, lc, ['a', 'b']), { line: 2, col: 3 });
  assert.deepEqual(yamlPosition(doc, lc, ['a', 'c', 1]), { line: 5, col: 7 });
  assert.deepEqual(yamlPosition(doc, lc, ['a', 'zz']), { line: 2, col: 3 });
  assert.deepEqual(yamlPosition(doc, lc, []), { line: 1, col: 1 });
});
