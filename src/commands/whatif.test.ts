import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { whatifTable } from '../report/whatif-table.js';
import { parseSlo, runWhatifCommand } from './whatif.js';
import { UsageError } from './usage-error.js';

const dir = mkdtempSync(join(tmpdir(), 'llmlb-whatif-'));
const config = join(dir, 'llmlb.yaml');
writeFileSync(
  config,
  [
    'backends:',
    '  - { name: a, url: http://127.0.0.1:1, models: [m] }',
    '  - { name: b, url: http://127.0.0.1:2, models: [m] }',
    'policy: least-connections',
  ].join('\n'),
);
// 80 requests of 7 conversations, each turn resending its conversation's blocks plus one new one.
const lines: string[] = [];
const convs = Array.from({ length: 7 }, (_, c) => [c * 1000]);
for (let i = 0; i < 80; i++) {
  const conv = convs[i % 7]!;
  conv.push(conv.at(-1)! + 1);
  lines.push(
    JSON.stringify({
      timestamp: i * 400,
      input_length: conv.length * 512 - 100,
      output_length: 20 + (i % 7),
      hash_ids: conv,
    }),
  );
}
const trace = join(dir, 'mooncake.jsonl');
writeFileSync(trace, lines.join('\n') + '\n');
const profile = join(dir, 'profile.yaml');
writeFileSync(profile, 'profile:\n  slots: 8\n  kvCapacityTokens: 200000\n  prefillPerTokenS: 0.0001\n');

describe('whatif', () => {
  it('every policy × replica count on worker threads, results.json, charts, recommendation', async () => {
    const out = join(dir, 'out');
    const r = await runWhatifCommand({
      tracePath: trace,
      configPath: config,
      replicas: [2, 1],
      policies: ['round-robin', 'prefix-trie'],
      slo: 'ttft-p90=60s',
      profilePath: profile,
      threads: 2,
      outDir: out,
      quiet: true,
    });
    assert.deepEqual(
      r.policies.map((p) => p.name),
      ['round-robin@1', 'prefix-trie@1', 'round-robin@2', 'prefix-trie@2'],
    );
    for (const p of r.policies) {
      assert.equal(p.sent, 80);
      assert.equal(p.completed, 80);
    }
    assert.equal(r.trace.requests, 80);
    assert.equal(r.trace.format, 'mooncake');
    // Turns resend their conversation: prefix-trie keeps conversations together and hits more.
    const hit = (name: string): number => r.policies.find((p) => p.name === name)!.prefixHitRate!;
    assert.ok(
      hit('prefix-trie@2') > hit('round-robin@2'),
      `${hit('prefix-trie@2')} vs ${hit('round-robin@2')}`,
    );
    assert.deepEqual(r.recommendation && { replicas: r.recommendation.replicas }, { replicas: 1 });
    const json = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as { policies: unknown[] };
    assert.equal(json.policies.length, 4);
    for (const f of ['latency-cdf.svg', 'ttft-cdf.svg', 'ttft-p90-vs-replicas.svg'])
      assert.match(readFileSync(join(out, f), 'utf8'), /^<svg/);
  });

  it('in one thread gives the same numbers as on workers', async () => {
    const run = (threads: number) =>
      runWhatifCommand({
        tracePath: trace,
        configPath: config,
        policies: ['least-connections', 'random'],
        profilePath: profile,
        threads,
        outDir: join(dir, `t${threads}`),
        charts: false,
        quiet: true,
      });
    const [one, two] = [await run(1), await run(2)];
    assert.deepEqual(one.policies, two.policies);
    assert.equal(one.recommendation?.replicas, 2);
    assert.ok(!existsSync(join(dir, 't1', 'latency-cdf.svg')));
  });

  it('bad arguments are usage errors', async () => {
    assert.throws(() => parseSlo('ttft=2s'), UsageError);
    assert.deepEqual(parseSlo('ttft-p90=1500ms,e2e-p99=30s'), [
      { metric: 'ttftS', stat: 'p90', limitS: 1.5, text: 'ttft-p90=1500ms' },
      { metric: 'latencyS', stat: 'p99', limitS: 30, text: 'e2e-p99=30s' },
    ]);
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, lines[0] + '\n{"timestamp": 5, "input_length": -1, "output_length": 1}\n');
    await assert.rejects(
      runWhatifCommand({ tracePath: bad, configPath: config, outDir: join(dir, 'x'), quiet: true }),
      (e: unknown) => e instanceof UsageError && /bad\.jsonl:2: input_length/.test(e.message),
    );
    await assert.rejects(
      runWhatifCommand({
        tracePath: trace,
        configPath: config,
        policies: ['nope'],
        outDir: join(dir, 'x'),
        quiet: true,
      }),
      (e: unknown) => e instanceof UsageError && /unknown policy 'nope'/.test(e.message),
    );
    const r = await runWhatifCommand({
      tracePath: bad,
      configPath: config,
      skipBad: true,
      policies: ['random'],
      outDir: join(dir, 'y'),
      charts: false,
      quiet: true,
    });
    assert.equal(r.trace.skippedLines, 1);
    assert.equal(r.trace.requests, 1);
    const missing = join(dir, 'no-such.jsonl');
    await assert.rejects(
      runWhatifCommand({ tracePath: missing, configPath: config, outDir: join(dir, 'z'), quiet: true }),
      (e: unknown) => e instanceof UsageError && e.message === `trace file not found: ${missing}`,
    );
  });

  it('the table gives units in its header and one precision per unit', async () => {
    const r = await runWhatifCommand({
      tracePath: trace,
      configPath: config,
      policies: ['round-robin'],
      profilePath: profile,
      slo: 'ttft-p90=60s',
      threads: 1,
      outDir: join(dir, 'table'),
      charts: false,
      quiet: true,
    });
    const text = whatifTable(
      r.policies.map((p) => ({ policy: p.policy, replicas: p.replicas, result: p })),
      parseSlo('ttft-p90=60s'),
    );
    const [head, , row] = text.split('\n');
    const cols = head!.trim().split(/\s{2,}/);
    assert.deepEqual(cols, [
      'replicas',
      'policy',
      'done %',
      'req/s',
      'ttft p50 s',
      'ttft p90 s',
      'e2e mean s',
      'e2e p90 s',
      'prefix hit %',
      'meets SLO',
    ]);
    const cells = row!.trim().split(/\s+/);
    assert.equal(cells[2], '100.0');
    assert.match(cells[3]!, /^\d+\.\d{2}$/);
    for (const c of cells.slice(4, 8)) assert.match(c, /^\d+\.\d{3}$/);
    assert.match(cells[8]!, /^\d+\.\d$/);
  });

  it('--rate-scale 1,4: every policy at every load, ×1 equal to a plain run, capacity against --slo', async () => {
    const base = {
      tracePath: trace,
      configPath: config,
      replicas: [1],
      policies: ['round-robin', 'prefix-trie'],
      profilePath: profile,
      threads: 1,
      quiet: true,
    };
    const plain = await runWhatifCommand({ ...base, outDir: join(dir, 'plain'), charts: false });
    const out = join(dir, 'sweep');
    const r = await runWhatifCommand({ ...base, outDir: out, rateScales: [4, 1], slo: 'ttft-p90=60s' });
    assert.deepEqual(
      r.policies.map((p) => p.name),
      ['round-robin@1@x1', 'prefix-trie@1@x1', 'round-robin@1@x4', 'prefix-trie@1@x4'],
    );
    // ×1 is the plain replay; ×4 the same 80 requests four times as fast: a longer mean wait.
    const strip = (p: object): unknown => {
      const { name: _n, rateScale: _k, ...rest } = p as { name: string; rateScale?: number };
      return rest;
    };
    assert.deepEqual(r.policies.slice(0, 2).map(strip), plain.policies.map(strip));
    assert.ok(r.policies.every((p) => p.sent === 80));
    assert.ok(r.policies[2]!.makespanS < r.policies[0]!.makespanS / 2);
    assert.ok(r.policies[2]!.latencyS.mean > r.policies[0]!.latencyS.mean);
    assert.deepEqual(r.sweep?.rateScales, [1, 4]);
    assert.equal(r.sweep?.bar, '--slo ttft-p90=60s');
    assert.deepEqual(
      r.sweep?.recommendations.map((x) => x.rateScale),
      [1, 4],
    );
    assert.deepEqual(r.recommendation, r.sweep?.recommendations[1]!.recommendation);
    assert.ok(existsSync(join(out, 'capacity-curves.svg')));
    assert.equal(plain.sweep, undefined);
    // One value: the replay that much faster, the plain shape.
    const fast = await runWhatifCommand({
      ...base,
      outDir: join(dir, 'fast'),
      charts: false,
      rateScales: [4],
    });
    assert.equal(fast.sweep, undefined);
    assert.deepEqual(fast.policies.map(strip), r.policies.slice(2).map(strip));
    await assert.rejects(() => runWhatifCommand({ ...base, outDir: out, rateScales: [0, 1] }), UsageError);
  });
});
