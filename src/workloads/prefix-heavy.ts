/**
 * Production-shaped prefix-heavy traffic (issue #30), written as a Mooncake trace (JSONL lines
 * `{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}`, one id per
 * 512-token block, trace-mooncake.ts) so it runs through the same importer as a user's own trace.
 * Shapes:
 *   - documents: RAG / document QA. A pool of long documents (15–50k tokens, lognormal), each under
 *     its application's system prompt, read with Zipf-like popularity: a request is the system
 *     prompt's blocks + one document's blocks + a short unique question. Popular documents are
 *     re-read seconds apart, the long tail minutes apart.
 *   - conversations: multi-turn chats. A conversation opens with a system prompt and attachments
 *     (long: 10–44k tokens); each later turn resends the previous prompt + the previous answer + a
 *     new user message, tens of seconds later; it ends after some turns or at MAX_PROMPT_TOKENS.
 *   - agents: tool loops. A run opens with its agent's tool definitions and a task, then re-sends
 *     its growing context every few seconds, each step appending the model's call and the tool's
 *     result (hundreds to thousands of tokens).
 *   - mixed: the three side by side, their request rates weighted.
 * Block ids follow Mooncake's own trace: a prompt's full blocks keep their ids in every later
 * prompt that extends it; the partial last block (and anything unique) gets fresh ids, so the
 * next turn's copy of that block (now with more tokens in it) is a new block.
 *
 * `rate` is the arrival rate of requests (all sessions together), a plain number that a load
 * sweep multiplies. Session shapes start sessions at rate ÷ (mean requests per session) and begin
 * in steady state (sessions already under way at time 0), so the rate holds from the first second.
 * Pure and deterministic: the same params and seed give the same lines.
 */
import { z } from 'zod';
import { createRng, deriveSeed } from '../core/rng.js';
import { ApiSchema, DEFAULT_MODEL, parseParams, positiveInt } from './common.js';
import { dist, DistSchema, sample, sampleInt, type Dist } from './dist.js';
import { MOONCAKE_BLOCK_TOKENS } from './trace-mooncake.js';
import { memorySource, replayLines } from './trace.js';
import type { ClientDriver } from './types.js';

export const PREFIX_HEAVY_SHAPES = ['documents', 'conversations', 'agents', 'mixed'] as const;
export type PrefixHeavyShape = (typeof PREFIX_HEAVY_SHAPES)[number];

/** No generated prompt is longer (the longest prompts of the traffic). */
export const MAX_PROMPT_TOKENS = 56_000;
/** Traffic generated when neither the params nor a scenario give a duration. */
export const DEFAULT_DURATION_S = 600;

const weight = z.number().finite().nonnegative();

export const prefixHeavyParamsSchema = z
  .strictObject({
    shape: z.enum(PREFIX_HEAVY_SHAPES),
    /** Requests per second, all sessions together (what a load sweep multiplies). */
    rate: z.number().finite().positive().default(4),
    /** Seconds of traffic (a scenario fills in its own). */
    durationS: z.number().finite().positive().optional(),
    /** `mixed`: each shape's share of the request rate. */
    weights: z
      .strictObject({
        documents: weight.default(0.4),
        conversations: weight.default(0.3),
        agents: weight.default(0.3),
      })
      .default({ documents: 0.4, conversations: 0.3, agents: 0.3 })
      .refine((w) => w.documents + w.conversations + w.agents > 0, { message: 'give some weight > 0' }),
    /** `documents`: how many documents the requests read, and the Zipf exponent of their popularity. */
    documents: positiveInt.default(400),
    zipf: z.number().finite().nonnegative().default(1),
    /** Answer lengths (every shape). */
    outputTokens: DistSchema.default({ dist: 'lognormal', mean: 200, sigma: 0.9, min: 2, max: 700 }),
    model: z.string().min(1).default(DEFAULT_MODEL),
    api: ApiSchema.default('openai-completions'),
  })
  .refine((p) => p.durationS === undefined || p.durationS * p.rate <= 1_000_000, {
    message: 'rate × durationS is over 1,000,000 requests (the trace is built in memory)',
    path: ['durationS'],
  });
export type PrefixHeavyParams = z.input<typeof prefixHeavyParamsSchema>;
type Params = z.output<typeof prefixHeavyParamsSchema>;

/** One generated request, before it becomes a line. */
interface Generated {
  readonly t: number;
  readonly input: number;
  readonly output: number;
  readonly ids: readonly number[];
}

/** Fresh block ids, shared by every shape of one trace so ids never collide. */
class BlockIds {
  private next = 0;
  fresh(): number {
    return this.next++;
  }
}

/**
 * A prompt as it grows: the ids of its full blocks (fixed once full) and its length. Its partial
 * last block has no fixed id: each request that ends inside it gets a fresh one.
 */
class Context {
  constructor(
    readonly ids: number[],
    public tokens: number,
  ) {}

  static of(blocks: readonly number[]): Context {
    return new Context([...blocks], blocks.length * MOONCAKE_BLOCK_TOKENS);
  }

  copy(): Context {
    return new Context([...this.ids], this.tokens);
  }

  /** Append `n` tokens: blocks that fill up get fresh ids (their content is new). */
  extend(n: number, ids: BlockIds): this {
    this.tokens += n;
    const full = Math.floor(this.tokens / MOONCAKE_BLOCK_TOKENS);
    while (this.ids.length < full) this.ids.push(ids.fresh());
    return this;
  }

  /** A request's hash_ids: the full blocks, then a fresh id for a partial last block. */
  requestIds(ids: BlockIds): number[] {
    return this.tokens % MOONCAKE_BLOCK_TOKENS === 0 ? [...this.ids] : [...this.ids, ids.fresh()];
  }
}

const lognormal = (mean: number, sigma: number, min: number, max: number): Dist =>
  dist({ dist: 'lognormal', mean, sigma, min, max });

/** The shapes' constants, each a production-shaped guess stated where it is used. */
const SHAPES = {
  documents: {
    /** RAG applications, each with its own system prompt (1–3 blocks). */
    apps: 6,
    appBlocks: [1, 3],
    documentTokens: lognormal(28_000, 0.35, 15_000, 50_000),
    questionTokens: lognormal(80, 0.7, 8, 600),
  },
  conversations: {
    apps: 8,
    appBlocks: [1, 4],
    /** System prompt + attachments of the first turn. */
    attachmentTokens: lognormal(20_000, 0.5, 10_000, 44_000),
    userTokens: lognormal(150, 0.8, 5, 2_000),
    /** Mean turns (geometric), and the most. */
    meanTurns: 7,
    maxTurns: 30,
    thinkS: lognormal(30, 0.6, 5, 180),
    /** Conversations under way at time 0 started up to this long before. */
    warmupS: 900,
  },
  agents: {
    /** Agents, each with its tool definitions (2–8 blocks). */
    apps: 6,
    appBlocks: [2, 8],
    taskTokens: lognormal(4_000, 0.8, 300, 20_000),
    toolResultTokens: lognormal(1_200, 0.9, 100, 8_000),
    meanSteps: 12,
    maxSteps: 40,
    /** Tool run + the answer's own time, between steps. */
    stepGapS: lognormal(3, 0.6, 0.5, 30),
    warmupS: 300,
  },
} as const;

/** The shared prefixes of `apps` applications: a block list each of [min, max] blocks. */
function appPrefixes(
  rng: () => number,
  apps: number,
  [min, max]: readonly number[],
  ids: BlockIds,
): number[][] {
  return Array.from({ length: apps }, () => {
    const n = min! + Math.floor(rng() * (max! - min! + 1));
    return Array.from({ length: n }, () => ids.fresh());
  });
}

/** Exponential gap of a Poisson process at `rate`. */
const gap = (rng: () => number, rate: number): number => -Math.log(1 - rng()) / rate;

/** 1 + geometric with the given mean, at most `max`. */
function geometric(rng: () => number, mean: number, max: number): number {
  const p = 1 / mean;
  const n = Math.ceil(Math.log(1 - rng()) / Math.log(1 - p));
  return Math.min(max, Math.max(1, n));
}

/** Zipf over ranks 0..n-1 (weight 1/(r+1)^s): a draw by binary search of the CDF. */
function zipfSampler(n: number, s: number): (rng: () => number) => number {
  const cdf = new Float64Array(n);
  let total = 0;
  for (let r = 0; r < n; r++) cdf[r] = total += 1 / Math.pow(r + 1, s);
  return (rng) => {
    const x = rng() * total;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid]! > x) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  };
}

function documents(p: Params, rate: number, durationS: number, seed: number, ids: BlockIds): Generated[] {
  const c = SHAPES.documents;
  const rng = createRng(deriveSeed(seed, 'prefix-heavy/documents'));
  const apps = appPrefixes(rng, c.apps, c.appBlocks, ids);
  // A document's blocks follow its application's system prompt (ids are prefix hashes: the same
  // text after another prompt is another block).
  const pool = Array.from({ length: p.documents }, () =>
    Context.of(apps[Math.floor(rng() * apps.length)]!).extend(sampleInt(c.documentTokens, rng), ids),
  );
  const pick = zipfSampler(pool.length, p.zipf);
  const out: Generated[] = [];
  for (let t = gap(rng, rate); t < durationS; t += gap(rng, rate)) {
    const prompt = pool[pick(rng)]!.copy().extend(Math.max(1, sampleInt(c.questionTokens, rng)), ids);
    out.push({ t, input: prompt.tokens, output: output(p, rng), ids: prompt.requestIds(ids) });
  }
  return out;
}

function output(p: Params, rng: () => number): number {
  return Math.max(1, sampleInt(p.outputTokens, rng));
}

/** A session's requests from `start` (some may fall before 0 or after the end: the caller trims). */
type Session = (start: number, rng: () => number, ids: BlockIds, apps: number[][]) => Generated[];

function conversation(p: Params): Session {
  const c = SHAPES.conversations;
  return (start, rng, ids, apps) => {
    const turns = geometric(rng, c.meanTurns, c.maxTurns);
    const ctx = Context.of(apps[Math.floor(rng() * apps.length)]!).extend(
      sampleInt(c.attachmentTokens, rng) + sampleInt(c.userTokens, rng),
      ids,
    );
    const out: Generated[] = [];
    let t = start;
    for (let turn = 0; turn < turns && ctx.tokens <= MAX_PROMPT_TOKENS; turn++) {
      const answer = output(p, rng);
      out.push({ t, input: ctx.tokens, output: answer, ids: ctx.requestIds(ids) });
      ctx.extend(answer + sampleInt(c.userTokens, rng), ids);
      t += sample(c.thinkS, rng);
    }
    return out;
  };
}

function agentRun(p: Params): Session {
  const c = SHAPES.agents;
  return (start, rng, ids, apps) => {
    const steps = geometric(rng, c.meanSteps, c.maxSteps);
    const ctx = Context.of(apps[Math.floor(rng() * apps.length)]!).extend(sampleInt(c.taskTokens, rng), ids);
    const out: Generated[] = [];
    let t = start;
    for (let step = 0; step < steps && ctx.tokens <= MAX_PROMPT_TOKENS; step++) {
      const call = output(p, rng);
      out.push({ t, input: ctx.tokens, output: call, ids: ctx.requestIds(ids) });
      ctx.extend(call + sampleInt(c.toolResultTokens, rng), ids);
      t += sample(c.stepGapS, rng);
    }
    return out;
  };
}

/**
 * Sessions started as a Poisson process from -warmupS, at the rate that gives `rate` requests a
 * second: rate ÷ the mean requests per session, measured on sessions drawn from a fixed stream
 * (so the start rate is the same for every seed).
 */
function sessions(
  kind: 'conversations' | 'agents',
  p: Params,
  rate: number,
  durationS: number,
  seed: number,
  ids: BlockIds,
): Generated[] {
  const c = SHAPES[kind];
  const session = kind === 'conversations' ? conversation(p) : agentRun(p);
  const calibration = createRng(deriveSeed(0, `prefix-heavy/${kind}/calibration`));
  const scratch = new BlockIds();
  const scratchApps = appPrefixes(calibration, c.apps, c.appBlocks, scratch);
  let requests = 0;
  const SAMPLE = 2000;
  for (let i = 0; i < SAMPLE; i++) requests += session(0, calibration, scratch, scratchApps).length;
  const startRate = rate / (requests / SAMPLE);

  const rng = createRng(deriveSeed(seed, `prefix-heavy/${kind}`));
  const apps = appPrefixes(rng, c.apps, c.appBlocks, ids);
  const out: Generated[] = [];
  for (let t = -c.warmupS + gap(rng, startRate); t < durationS; t += gap(rng, startRate)) {
    for (const g of session(t, rng, ids, apps)) if (g.t >= 0 && g.t < durationS) out.push(g);
  }
  return out;
}

/** The generated requests of a shape in time order (ties in generation order). */
function generate(p: Params, seed: number): Generated[] {
  const durationS = p.durationS ?? DEFAULT_DURATION_S;
  const ids = new BlockIds();
  const parts: Generated[][] = [];
  const shares: [Exclude<PrefixHeavyShape, 'mixed'>, number][] =
    p.shape === 'mixed'
      ? [
          ['documents', p.weights.documents],
          ['conversations', p.weights.conversations],
          ['agents', p.weights.agents],
        ]
      : [[p.shape, 1]];
  const total = shares.reduce((a, [, w]) => a + w, 0);
  for (const [shape, w] of shares) {
    if (w === 0) continue;
    const rate = (p.rate * w) / total;
    parts.push(
      shape === 'documents'
        ? documents(p, rate, durationS, seed, ids)
        : sessions(shape, p, rate, durationS, seed, ids),
    );
  }
  const all = parts.flat();
  // Stable: equal times keep generation order.
  all.sort((a, b) => a.t - b.t);
  return all;
}

/** The trace as Mooncake JSONL lines (no trailing newlines), in time order. Throws a ZodError on bad params. */
export function prefixHeavyTraceLines(params: PrefixHeavyParams, seed: number): string[] {
  const p = parseParams(prefixHeavyParamsSchema, params);
  return generate(p, seed).map((g) =>
    JSON.stringify({
      timestamp: Math.round(g.t * 1000),
      input_length: g.input,
      output_length: g.output,
      hash_ids: g.ids,
    }),
  );
}

/**
 * The `prefix-heavy` workload: the generated lines replayed through the Mooncake importer (the
 * path a user's own trace takes), generated once per seed and replayed for every run.
 */
export function prefixHeavyWorkload(params: PrefixHeavyParams, seed: number): ClientDriver {
  const p = parseParams(prefixHeavyParamsSchema, params);
  const lines = prefixHeavyTraceLines(p, seed);
  const replay = replayLines(
    memorySource(`prefix-heavy ${p.shape}`, lines),
    { format: 'mooncake', model: p.model, api: p.api },
    seed,
    { inOrder: true },
  );
  return {
    start: () => replay.start(),
    stream: () => replay.stream(),
    onFinish: () => [],
    reusable: true,
  };
}
