import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ZodError } from 'zod';
import { parseScenario, ScenarioError } from '../scenario/load.js';
import { createWorkload } from './index.js';
import { MAX_PROMPT_TOKENS, prefixHeavyTraceLines, PREFIX_HEAVY_SHAPES } from './prefix-heavy.js';
import { MOONCAKE_BLOCK_TOKENS, mooncakeFormat } from './trace-mooncake.js';

interface Line {
  timestamp: number;
  input_length: number;
  output_length: number;
  hash_ids: number[];
}

const DURATION_S = 300;
const parsed = (shape: (typeof PREFIX_HEAVY_SHAPES)[number], seed = 1): Line[] =>
  prefixHeavyTraceLines({ shape, rate: 4, durationS: DURATION_S }, seed).map((l) => JSON.parse(l) as Line);

/** Share of all prompt blocks whose id an earlier request (in time order) already sent. */
function seenBefore(lines: readonly Line[]): number {
  const seen = new Set<number>();
  let blocks = 0;
  let shared = 0;
  for (const l of lines) {
    for (const h of l.hash_ids) if (seen.has(h)) shared++;
    blocks += l.hash_ids.length;
    for (const h of l.hash_ids) seen.add(h);
  }
  return shared / blocks;
}

/** Sharing a shape must show (the documents, turns and steps re-sent), and not everything shared. */
const SHARE: Record<(typeof PREFIX_HEAVY_SHAPES)[number], [number, number]> = {
  documents: [0.7, 0.95],
  conversations: [0.6, 0.95],
  agents: [0.7, 0.97],
  mixed: [0.6, 0.95],
};

describe('prefix-heavy trace generator', () => {
  for (const shape of PREFIX_HEAVY_SHAPES) {
    it(`${shape}: Mooncake lines in time order, at about the rate, lengths in bounds, blocks re-sent`, () => {
      const text = prefixHeavyTraceLines({ shape, rate: 4, durationS: DURATION_S }, 1);
      const read = mooncakeFormat.reader();
      for (const l of text) assert.ok(read(l) !== undefined);
      assert.ok(mooncakeFormat.detect(text[0]!));
      const lines = text.map((l) => JSON.parse(l) as Line);
      const rate = lines.length / DURATION_S;
      assert.ok(rate > 3 && rate < 5, `${rate} req/s`);
      for (let i = 1; i < lines.length; i++) assert.ok(lines[i]!.timestamp >= lines[i - 1]!.timestamp);
      assert.ok(lines.at(-1)!.timestamp < DURATION_S * 1000);
      for (const l of lines) {
        assert.ok(l.input_length >= 1 && l.input_length <= MAX_PROMPT_TOKENS, `${l.input_length}`);
        assert.ok(l.output_length >= 2 && l.output_length <= 700, `${l.output_length}`);
        // One id per 512-token block, the partial last one included (as Mooncake's trace).
        assert.equal(l.hash_ids.length, Math.ceil(l.input_length / MOONCAKE_BLOCK_TOKENS));
      }
      const share = seenBefore(lines);
      const [lo, hi] = SHARE[shape];
      assert.ok(share >= lo && share <= hi, `share of blocks seen before ${share}`);
    });
  }

  it('a request that ends inside a block has a last block no other request sends', () => {
    const lines = parsed('mixed');
    const count = new Map<number, number>();
    for (const l of lines) for (const h of l.hash_ids) count.set(h, (count.get(h) ?? 0) + 1);
    for (const l of lines)
      if (l.input_length % MOONCAKE_BLOCK_TOKENS !== 0) assert.equal(count.get(l.hash_ids.at(-1)!), 1);
  });

  it('documents: 15–50k-token documents under a short question; popular ones re-read', () => {
    const lines = parsed('documents');
    for (const l of lines) assert.ok(l.input_length > 15_000 && l.input_length < 50_000 + 3 * 512 + 600);
    // A document is known by its 29th block (inside every one, system prompt included): some are
    // read many times, many more than once.
    const reads = new Map<number, number>();
    for (const l of lines) {
      const key = l.hash_ids[28]!;
      reads.set(key, (reads.get(key) ?? 0) + 1);
    }
    const counts = [...reads.values()].sort((a, b) => b - a);
    assert.ok(counts[0]! >= 50, `most read ${counts[0]}`);
    assert.ok(counts.filter((c) => c > 1).length >= counts.length / 3, `${counts.length} documents`);
  });

  it('conversations and agents: a later request extends an earlier prompt by its full blocks', () => {
    for (const shape of ['conversations', 'agents'] as const) {
      const lines = parsed(shape);
      // Full blocks of each prompt, by their last block's id.
      const prompts = new Map<number, number>();
      let extending = 0;
      for (const l of lines) {
        const full = Math.floor(l.input_length / MOONCAKE_BLOCK_TOKENS);
        // Does an earlier prompt's full-block list end at one of this prompt's blocks, with the same length?
        for (let k = full; k >= 1; k--) {
          if (prompts.get(l.hash_ids[k - 1]!) === k && k < l.hash_ids.length - 1) {
            extending++;
            break;
          }
        }
        if (full > 0) prompts.set(l.hash_ids[full - 1]!, full);
      }
      assert.ok(extending / lines.length > 0.6, `${shape}: ${extending} of ${lines.length}`);
    }
  });

  it('is deterministic by seed', () => {
    const a = prefixHeavyTraceLines({ shape: 'mixed', rate: 2, durationS: 120 }, 7);
    assert.deepEqual(prefixHeavyTraceLines({ shape: 'mixed', rate: 2, durationS: 120 }, 7), a);
    assert.notDeepEqual(prefixHeavyTraceLines({ shape: 'mixed', rate: 2, durationS: 120 }, 8), a);
  });

  it('the rate scales the requests; mixed weights choose the shapes', () => {
    const one = prefixHeavyTraceLines({ shape: 'documents', rate: 2, durationS: 300 }, 3).length;
    const three = prefixHeavyTraceLines({ shape: 'documents', rate: 6, durationS: 300 }, 3).length;
    assert.ok(three / one > 2.6 && three / one < 3.4, `${three} / ${one}`);
    const docsOnly = prefixHeavyTraceLines(
      { shape: 'mixed', weights: { documents: 1, conversations: 0, agents: 0 }, durationS: 60 },
      3,
    ).map((l) => JSON.parse(l) as Line);
    assert.ok(docsOnly.every((l) => l.input_length > 15_000));
  });

  it('bad params are a ZodError naming the field', () => {
    for (const [params, field] of [
      [{ shape: 'novels' }, 'shape'],
      [{ shape: 'documents', rate: 0 }, 'rate'],
      [{ shape: 'mixed', weights: { documents: 0, conversations: 0, agents: 0 } }, 'weights'],
      [{ shape: 'agents', turns: 3 }, ''],
    ] as const)
      assert.throws(
        () => prefixHeavyTraceLines(params as never, 1),
        (e: unknown) => e instanceof ZodError && e.issues[0]!.path.join('.') === field,
        JSON.stringify(params),
      );
  });
});

describe('prefix-heavy workload', () => {
  it('replays the generated lines through the Mooncake importer', () => {
    const lines = prefixHeavyTraceLines({ shape: 'agents', rate: 2, durationS: 60 }, 1);
    const driver = createWorkload({ type: 'prefix-heavy', shape: 'agents', rate: 2, durationS: 60 }, 1);
    const rs = driver.start();
    assert.equal(rs.length, lines.length);
    assert.equal(driver.reusable, true);
    rs.forEach((r, i) => {
      const l = JSON.parse(lines[i]!) as Line;
      assert.equal(r.at, l.timestamp / 1000);
      assert.equal(r.request.promptTokens, l.input_length);
      assert.equal(r.request.prefixBlocks?.blockTokens, MOONCAKE_BLOCK_TOKENS);
      assert.equal(r.request.prefixBlocks?.chain.length, l.hash_ids.length);
    });
    assert.deepEqual([...{ [Symbol.iterator]: () => driver.stream!() }], rs);
  });

  it('a scenario names it; bad params are the loader’s error with the field', () => {
    const yaml = (workload: string): string => `
name: t
durationS: 30
fleet:
  - name: a
workload: ${workload}
policies: [round-robin]
`;
    const s = parseScenario(yaml('{ type: prefix-heavy, shape: conversations, rate: 3 }'), 'ok.yaml');
    const rs = s.createDriver(1).start();
    assert.ok(rs.length > 30 && rs.every((r) => r.at < 30));
    assert.throws(
      () => parseScenario(yaml('{ type: prefix-heavy, shape: novels }'), 'bad.yaml'),
      (e: unknown) =>
        e instanceof ScenarioError && e.field === 'workload.shape' && /bad\.yaml:6/.test(e.message),
    );
  });
});
