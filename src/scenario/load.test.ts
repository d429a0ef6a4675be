import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { countTokens } from '../engine/tokens.js';
import type { EngineProfile } from '../engine/types.js';
import { loadScenario, parseScenario, ScenarioError } from './load.js';

const SCENARIOS = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'scenarios');

/**
 * Seconds a request takes alone on an engine (design §3): the admitting iteration prefills the
 * prompt and yields the first token; iteration k then costs base + perSeq + perToken·(P + k).
 */
function loneRequestS(p: EngineProfile, promptTokens: number, outputTokens: number): number {
  const N = outputTokens;
  const decode = N * (p.baseStepS + p.perSeqS) + p.perTokenS * (N * promptTokens + (N * (N - 1)) / 2);
  return (decode + p.prefillPerTokenS * promptTokens) / p.speed;
}

const MINIMAL = `
name: t
durationS: 10
fleet:
  - name: a
workload: { type: constant, rate: 1 }
policies: [round-robin]
`;

function expectError(text: string, field: string, re: RegExp = /./, line?: number): void {
  assert.throws(
    () => parseScenario(text, 'bad.yaml'),
    (e: unknown) => {
      assert.ok(e instanceof ScenarioError, String(e));
      assert.equal(e.field, field, e.message);
      assert.match(e.message, re);
      if (line !== undefined) {
        assert.equal(e.line, line, e.message);
        assert.ok(e.message.startsWith(`bad.yaml:${line}:`), e.message);
      }
      return true;
    },
  );
}

describe('shipped scenarios', () => {
  it('ollamarouter-2node: 60 requests 40 s apart; a lone request takes ~42 s on fast, ~5× on slow', () => {
    const s = loadScenario(join(SCENARIOS, 'ollamarouter-2node.yaml'));
    assert.deepEqual(
      s.fleet.map((b) => b.name),
      ['fast', 'slow'],
    );
    assert.equal(s.durationS, 2400);
    assert.equal(s.graceS, 1800);
    assert.deepEqual(
      s.policies.map((p) => p.name),
      ['pinned', 'round-robin', 'least-connections', 'ollama-router', 'estimated-wait'],
    );
    assert.deepEqual(s.policies[0]?.params, { backend: 'fast' });
    const rs = s.createDriver(s.seed).start();
    assert.equal(rs.length, 60);
    assert.equal(rs[1]!.at - rs[0]!.at, 40);
    const prompt = rs.reduce((a, r) => a + countTokens(r.request.prompt!), 0) / rs.length;
    const output = rs.reduce((a, r) => a + r.request.outputTokens, 0) / rs.length;
    const [fast, slow] = s.fleet;
    // The workload's mean-sized request (280 prompt, 2220 output tokens):
    const fastS = loneRequestS(fast!.profile, 280, 2220);
    assert.ok(Math.abs(fastS - 42) < 0.5, `fast lone request ${fastS} s`);
    assert.ok(Math.abs(loneRequestS(slow!.profile, 280, 2220) / fastS - 5) < 1e-9);
    // …and this seed's requests average close to it.
    assert.ok(Math.abs(loneRequestS(fast!.profile, prompt, output) - 42) < 2, `${prompt} / ${output}`);
    assert.ok(loneRequestS(fast!.profile, 230, 1820) > 33 && loneRequestS(fast!.profile, 330, 2620) < 51);
  });

  it('heimdall-burst: workload.py command line on 4 pods', () => {
    const s = loadScenario(join(SCENARIOS, 'heimdall-burst.yaml'));
    assert.deepEqual(
      s.fleet.map((b) => b.name),
      ['pod-0', 'pod-1', 'pod-2', 'pod-3'],
    );
    const rs = s.createDriver(s.seed).start();
    assert.equal(rs.length, 800);
    assert.equal(rs.filter((r) => r.request.label === 'HEAVY').length, 400);
    assert.ok(rs.every((r) => r.at < s.durationS));
    assert.ok(s.fleet.every((b) => b.models.includes(rs[0]!.request.model)));
    const superHeavy = loneRequestS(s.fleet[0]!.profile, countTokens(rs[3]!.request.prompt!), 1050);
    assert.ok(superHeavy > 30 && superHeavy < 45, `${superHeavy}`);
  });

  it('mixed-4x: 2000 requests at ~20 rps on four instances', () => {
    const s = loadScenario(join(SCENARIOS, 'mixed-4x.yaml'));
    assert.equal(s.fleet.length, 4);
    assert.deepEqual(
      s.policies.map((p) => p.name),
      [
        'round-robin',
        'least-connections',
        'random',
        'jsq',
        'max-capacity',
        'min-min',
        'estimated-wait',
        'workload-aware',
        'rl',
      ],
    );
    const rs = s.createDriver(s.seed).start();
    assert.equal(rs.length, 2000);
    assert.ok(Math.abs(2000 / rs.at(-1)!.at - 20) < 1.5);
    assert.ok(rs.at(-1)!.at < s.durationS);
    assert.ok(new Set(rs.map((r) => r.request.sizeClass)).size === 4);
  });

  it("prefix-*-8 (issue #30): ~4 req/s of 1–56k-token prompts on the issue's 8 replicas, one 3× slower in unequal", () => {
    for (const [file, slow] of [
      ['prefix-documents-8.yaml', 0],
      ['prefix-conversations-8.yaml', 0],
      ['prefix-agents-8.yaml', 0],
      ['prefix-unequal-8.yaml', 1],
    ] as const) {
      const s = loadScenario(join(SCENARIOS, file));
      assert.equal(s.fleet.length, 8, file);
      assert.equal(s.fleet.filter((b) => Math.abs(b.profile.speed - 1 / 3) < 1e-6).length, slow, file);
      for (const b of s.fleet) {
        assert.equal(b.profile.prefixCacheBlocks, 40000);
        assert.equal(b.profile.kvCapacityTokens, 400000);
      }
      assert.deepEqual(
        s.policies.map((p) => p.name),
        ['round-robin', 'least-connections', 'prefix-trie', 'sglang-cache-aware', 'estimated-wait'],
      );
      const rs = s.createDriver(s.seed).start();
      const rate = rs.length / s.durationS;
      assert.ok(rate > 3.4 && rate < 4.6, `${file}: ${rate} req/s`);
      assert.ok(rs.every((r) => r.at < s.durationS && r.request.promptTokens! <= 56_000));
      assert.ok(s.graceS >= 600);
    }
  });

  it('small-exhaustive: 8 requests, 2 instances, 1 per second', () => {
    const s = loadScenario(join(SCENARIOS, 'small-exhaustive.yaml'));
    assert.equal(s.fleet.length, 2);
    const rs = s.createDriver(s.seed).start();
    assert.deepEqual(
      rs.map((r) => r.at),
      [0, 1, 2, 3, 4, 5, 6, 7],
    );
    for (const r of rs) {
      const p = countTokens(r.request.prompt!);
      assert.ok(p >= 10 && p <= 100 && r.request.outputTokens >= 10 && r.request.outputTokens <= 100);
    }
  });

  it('a driver per run: same seed → same requests', () => {
    const s = loadScenario(join(SCENARIOS, 'small-exhaustive.yaml'));
    assert.deepEqual(s.createDriver(3).start(), s.createDriver(3).start());
    assert.notDeepEqual(s.createDriver(3).start(), s.createDriver(4).start());
  });
});

describe('parseScenario', () => {
  it('fills defaults: seed 1, grace 0, time scale 1, the built-in profile, model llama3', () => {
    const s = parseScenario(MINIMAL, 'min.yaml');
    assert.equal(s.seed, 1);
    assert.equal(s.graceS, 0);
    assert.equal(s.timeScale, 1);
    assert.equal(s.fleet[0]!.maxConcurrency, Infinity);
    assert.equal(s.fleet[0]!.weight, 1);
    assert.deepEqual(s.fleet[0]!.models, ['llama3']);
    assert.equal(s.fleet[0]!.profile.slots, 4);
    // The workload's durationS defaults to the scenario's.
    assert.equal(s.createDriver(1).start().length, 10);
  });

  it('merges profiles (built-in ← defaults ← entry) and expands counts', () => {
    const s = parseScenario(
      `
name: t
durationS: 10
defaults: { profile: { slots: 2, speed: 0.5 }, models: [m], region: eu, maxConcurrency: 3 }
fleet:
  - { name: gpu, count: 3, profile: { speed: 2 }, weight: 2 }
  - { name: cpu, models: [m, n], region: us }
workload: { type: constant, rate: 1, model: m }
policies: [round-robin, { name: estimated-wait, alpha: 0.3 }, { name: least-connections }, { name: p, params: { k: 2 } }]
`,
      'x.yaml',
    );
    assert.deepEqual(
      s.fleet.map((b) => [
        b.name,
        b.profile.slots,
        b.profile.speed,
        b.region,
        b.weight,
        b.maxConcurrency,
        b.models,
      ]),
      [
        ['gpu-0', 2, 2, 'eu', 2, 3, ['m']],
        ['gpu-1', 2, 2, 'eu', 2, 3, ['m']],
        ['gpu-2', 2, 2, 'eu', 2, 3, ['m']],
        ['cpu', 2, 0.5, 'us', 1, 3, ['m', 'n']],
      ],
    );
    assert.equal(s.fleet[0]!.profile.prefillPerTokenS, 3.2e-4);
    assert.deepEqual(s.policies, [
      { name: 'round-robin' },
      { name: 'estimated-wait', params: { alpha: 0.3 } },
      { name: 'least-connections' },
      { name: 'p', params: { k: 2 } },
    ]);
  });

  it('resolves a trace path against the scenario file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmlb-scn-'));
    writeFileSync(join(dir, 'tr.jsonl'), '{"at": 0, "promptTokens": 8, "outputTokens": 2}\n');
    const file = join(dir, 's.yaml');
    writeFileSync(file, MINIMAL.replace('{ type: constant, rate: 1 }', '{ type: trace, path: tr.jsonl }'));
    assert.equal(loadScenario(file).createDriver(1).start().length, 1);
    writeFileSync(join(dir, 'tr.jsonl'), '{"at": 0, "outputTokens": 2}\n');
    assert.throws(() => loadScenario(file), /s\.yaml:6:\d+: workload: .*tr\.jsonl:1: prompt: give prompt/);
  });
});

describe('scenario errors name the field (and line)', () => {
  it('unknown top-level field', () => expectError(MINIMAL + 'colour: red\n', 'colour', /unknown key/, 8));
  it('missing required field', () =>
    expectError(MINIMAL.replace('durationS: 10\n', ''), 'durationS', /number/));
  it('wrong type', () =>
    expectError(MINIMAL.replace('durationS: 10', 'durationS: soon'), 'durationS', /number/, 3));
  it('bad profile field', () =>
    expectError(
      MINIMAL.replace('- name: a', '- name: a\n    profile: { slots: 0 }'),
      'fleet[0].profile.slots',
      />/,
      6,
    ));
  it('misspelt profile field', () =>
    expectError(
      MINIMAL.replace('- name: a', '- name: a\n    profile: { slot: 2 }'),
      'fleet[0].profile.slot',
      /unknown key/,
      6,
    ));
  it('bad backend name', () =>
    expectError(MINIMAL.replace('- name: a', '- name: "a b"'), 'fleet[0].name', /letters/, 5));
  it('empty fleet', () =>
    expectError(MINIMAL.replace('  - name: a\n', '').replace('fleet:', 'fleet: []'), 'fleet'));
  it('duplicate backend names after expansion', () =>
    expectError(
      MINIMAL.replace('- name: a', '- { name: a, count: 2 }\n  - name: a-1'),
      'fleet[1].name',
      /already used/,
      6,
    ));
  it('unknown workload type', () =>
    expectError(
      MINIMAL.replace('type: constant', 'type: steady'),
      'workload.type',
      /unknown workload type 'steady'.*constant/,
      6,
    ));
  it('bad workload param', () =>
    expectError(MINIMAL.replace('rate: 1', 'rate: -1'), 'workload.rate', />0/, 6));
  it('unknown workload param', () =>
    expectError(MINIMAL.replace('rate: 1', 'rate: 1, burst: 2'), 'workload.burst', /unknown key/, 6));
  it('misspelt keys say what they meant: top level, in the fleet, in the workload', () => {
    expectError(
      MINIMAL.replace('durationS: 10', 'durationS: 10\npolices: [random]'),
      'polices',
      /did you mean `policies`\?/,
    );
    expectError(
      MINIMAL.replace('- name: a', '- name: a\n    profile: { slot: 2 }'),
      'fleet[0].profile.slot',
      /did you mean `slots`\?/,
    );
    expectError(
      MINIMAL.replace('rate: 1', 'rate: 1, durationz: 3'),
      'workload.durationz',
      /did you mean `durationS`\?/,
    );
    assert.throws(
      () => parseScenario(MINIMAL + 'colour: red\n', 'bad.yaml'),
      (e: unknown) => !/did you mean/.test(String(e)),
    );
  });
  it('bad length distribution', () =>
    expectError(
      MINIMAL.replace('rate: 1', 'rate: 1, promptTokens: { dist: uniform, min: 9, max: 3 }'),
      'workload.promptTokens.max',
      /min must be <= max/,
    ));
  it('model nobody serves', () =>
    expectError(
      MINIMAL.replace('rate: 1', 'rate: 1, model: gpt'),
      'workload.model',
      /no backend .* 'gpt'/,
      6,
    ));
  it('default model nobody serves', () =>
    expectError(MINIMAL.replace('- name: a', '- { name: a, models: [m] }'), 'workload.model', /'llama3'/));
  it('policies must be names', () =>
    expectError(MINIMAL.replace('[round-robin]', '[{ alpha: 1 }]'), 'policies[0]'));
  it('invalid YAML gives its line', () =>
    assert.throws(
      () => parseScenario('name: [a\n', 'bad.yaml'),
      /^ScenarioError: bad\.yaml:\d+:\d+: invalid YAML/,
    ));
  it('unreadable file', () => assert.throws(() => loadScenario('/nonexistent/x.yaml'), ScenarioError));
});
