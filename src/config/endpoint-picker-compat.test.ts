import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { backendView, requestInfo, chosen } from '../core/testing.js';
import { buildProfile } from '../core/policies/framework/endpoint-picker-config.js';
import type { ScoreExplanation } from '../core/policies/framework/plugin.js';
import { ConfigError, parseConfig, parseEndpointPickerConfig, type ParseOptions } from './load.js';
import { policyNames, createPolicy } from '../core/policies/index.js';

/** llm-d's and GIE's own sample configs, as written (test/fixtures/llm-d/). */
const fixture = (name: string): string =>
  readFileSync(new URL(`../../test/fixtures/llm-d/${name}`, import.meta.url), 'utf8');

const opts: ParseOptions = {
  knownPolicies: policyNames(),
  validatePolicy: (spec, scheduling) => void createPolicy(spec, Math.random, scheduling),
  source: 't.yaml',
};

const errorOf = (f: () => unknown): ConfigError => {
  try {
    f();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  assert.fail('expected a ConfigError');
};

/** The samples embedded as llmlb's `scheduling:` block (indented as YAML wants). */
const asRouterConfig = (epc: string): string =>
  [
    'backends:',
    '  - { name: a, url: "http://127.0.0.1:8000", api: openai, models: [m] }',
    'policy: default',
    'scheduling:',
    ...epc.split('\n').map((l) => `  ${l}`),
  ].join('\n');

test('GIE default plugins (inference.networking.x-k8s.io/v1alpha1, old kv-cache-scorer) load as written, with a deprecation warning', () => {
  const { config, warnings } = parseEndpointPickerConfig(fixture('gie-default-plugins-v2.yaml'), 'gie.yaml');
  assert.equal(config.apiVersion, 'inference.networking.x-k8s.io/v1alpha1');
  assert.deepEqual(warnings, [
    "plugins[1]: plugin type 'kv-cache-scorer' is deprecated: use 'kv-cache-utilization-scorer'",
  ]);
  // It runs: the old name built the current scorer, the queue scorer picks the idle engine.
  const p = buildProfile(config, 'default', () => 0.5);
  const m = (waiting: number, kv: number) => ({ running: 1, waiting, kvUsage: kv, at: 0 });
  const bs = [backendView('busy', 0, { metrics: m(9, 0.9) }), backendView('idle', 1, { metrics: m(0, 0.1) })];
  assert.equal(chosen(p.pick(requestInfo('1', 'hello'), bs, 0))?.name, 'idle');
  // And embedded as llmlb's scheduling block, named by `policy:`.
  const c = parseConfig(asRouterConfig(fixture('gie-default-plugins-v2.yaml')), opts);
  assert.equal(c.policy.name, 'default');
});

test("llm-d's passthrough sample (llm-d.ai/v1alpha1: parser, handler, decode-filter) loads as written", () => {
  const { config, warnings } = parseEndpointPickerConfig(fixture('llm-d-passthrough-epp-config.yaml'));
  assert.equal(config.apiVersion, 'llm-d.ai/v1alpha1');
  assert.deepEqual(warnings, []);
  const p = buildProfile(config, 'default', () => 0.5);
  // decode-filter keeps every backend (llmlb has no P/D roles); both scorers score them.
  const seen: ScoreExplanation[] = [];
  p.explain = (e) => seen.push(e);
  const bs = [backendView('a', 0), backendView('b', 1)];
  assert.ok(p.pick(requestInfo('1'), bs, 0));
  assert.deepEqual(seen[0]!.backends, ['a', 'b']);
  assert.deepEqual(
    seen[0]!.scorers.map((s) => s.name),
    ['active-request-scorer', 'session-affinity-scorer'],
  );
  assert.equal(
    parseConfig(asRouterConfig(fixture('llm-d-passthrough-epp-config.yaml')), opts).policy.name,
    'default',
  );
});

test('old plugin names (single-profile, max-score) still load under llm-d.ai/v1alpha1, each with a warning', () => {
  const { config, warnings } = parseEndpointPickerConfig(fixture('llm-d-load-config.yaml'));
  assert.deepEqual(warnings, [
    "plugins[0]: plugin type 'single-profile' is deprecated: use 'single-profile-handler'",
    "plugins[3]: plugin type 'max-score' is deprecated: use 'max-score-picker'",
  ]);
  const p = buildProfile(config, 'default', () => 0.5);
  assert.equal(chosen(p.pick(requestInfo('1'), [backendView('a', 0)], 0))?.name, 'a');
});

test("a plugin llmlb cannot run (llm-d's kvcache-aware-scorer, now precise-prefix-cache-scorer) fails naming it and why", () => {
  const e = errorOf(() => parseEndpointPickerConfig(fixture('llm-d-kvcache-load-config.yaml'), 'kv.yaml'));
  assert.equal(e.issues.length, 1);
  assert.equal(e.issues[0]!.path, 'plugins[2].type');
  assert.match(
    e.issues[0]!.message,
    /'kvcache-aware-scorer' \(now 'precise-prefix-cache-scorer'\) cannot run in llmlb/,
  );
  assert.match(e.issues[0]!.message, /KV-cache events over ZMQ/);
  assert.equal(e.issues[0]!.line, 12);
});

test('an unknown apiVersion is a clear error naming both accepted ones', () => {
  const text = fixture('llm-d-load-config.yaml').replace(
    'apiVersion: llm-d.ai/v1alpha1',
    'apiVersion: llm-d.ai/v9',
  );
  const e = errorOf(() => parseEndpointPickerConfig(text));
  assert.equal(e.issues[0]!.path, 'apiVersion');
  assert.match(
    e.issues[0]!.message,
    /unknown apiVersion "llm-d.ai\/v9": an EndpointPickerConfig is 'llm-d.ai\/v1alpha1' or 'inference.networking.x-k8s.io\/v1alpha1'/,
  );
  // The same inside llmlb's own config.
  const e2 = errorOf(() => parseConfig(asRouterConfig(text), opts));
  assert.ok(
    e2.issues.some((i) => i.path === 'scheduling.apiVersion' && /unknown apiVersion/.test(i.message)),
  );
});

test('a plumbing plugin in a profile, or a parser ref to a scorer, is refused with the reason', () => {
  const inProfile = [
    'plugins: [{ type: single-profile-handler }, { type: queue-scorer }]',
    'schedulingProfiles:',
    '  - name: p',
    '    plugins: [{ pluginRef: single-profile-handler }, { pluginRef: queue-scorer }]',
  ].join('\n');
  const e = errorOf(() => parseEndpointPickerConfig(inProfile));
  assert.equal(e.issues[0]!.path, 'schedulingProfiles[0].plugins[0].pluginRef');
  assert.match(e.issues[0]!.message, /is not a filter, scorer or picker: llmlb loads it and does nothing/);
  const parser = [
    'plugins: [{ type: queue-scorer }]',
    'requestHandler: { parsers: [{ pluginRef: queue-scorer }] }',
    'schedulingProfiles: [{ name: p, plugins: [{ pluginRef: queue-scorer }] }]',
  ].join('\n');
  const e2 = errorOf(() => parseEndpointPickerConfig(parser));
  assert.equal(e2.issues[0]!.path, 'requestHandler.parsers[0].pluginRef');
});

test('an unknown plugin type lists the known ones, plumbing included', () => {
  const text =
    'plugins: [{ type: no-such-scorer }]\nschedulingProfiles: [{ name: p, plugins: [{ pluginRef: no-such-scorer }] }]';
  const e = errorOf(() => parseEndpointPickerConfig(text));
  assert.match(
    e.issues[0]!.message,
    /unknown plugin type 'no-such-scorer' \(known: .*decode-filter.*single-profile-handler/,
  );
});
