/**
 * Port of Heimdall's `workload.py` (Heimdall's "JSQ-favorable workload with inline heavy requests"):
 *  1. `heavySeeds` heavy requests first, `seedInterval` apart, cycling through HEAVY_SPECS — every
 *     fourth is the super-heavy (4000 words, 1050 tokens), so round-robin over 4 pods pins all of
 *     them on one pod;
 *  2. from `burstStart`, a shuffled burst of half SHORT (10–20 words in, 25–40 tokens out) and half
 *     MED (120–180 words, 60–90 tokens) requests, `burstInterval ± jitter` apart;
 *  3. inline heavies spread evenly through the burst (one after every `inlineEvery` items, or
 *     `inlineHeavyCount` of them), each followed by an extra `inlineExtraGap`.
 * Same algorithm, same ids (S001_HEAVY, B0001_SHORT, M0001_MED, I001_HEAVY), same parameter names
 * (camelCase in YAML; the script's own `heavy-seeds` / `heavy_seeds` spellings are accepted too).
 * The script seeds Python's `random` with fixed values (42, 12345); here everything draws from
 * streams of the scenario seed, so the shuffle and jitter differ from the script's but are as
 * reproducible. Prompt text follows `make_prompt`: "[ID] " + `isl` vocabulary words + " " +
 * min(5·isl, 2000) noise letters; the output length is the request's `max_tokens` (temperature 0,
 * the script's intent is that a request generates its OSL).
 */
import { z } from 'zod';
import { createRng, deriveSeed } from '../core/rng.js';
import { ApiSchema, openLoop, parseParams, positiveSeconds, requestFromMessages, seconds } from './common.js';
import type { ClientDriver, ScheduledRequest } from './types.js';

/** (input words, output tokens), cycled in order — as in the script. */
export const HEAVY_SPECS: readonly (readonly [number, number])[] = [
  [1300, 320],
  [1500, 350],
  [2700, 780],
  [4000, 1050],
];

// The script's vocabulary, duplicates included (they weight the draw).
const VOCAB = (
  'quantum neural matrix optimization graph tensor latency throughput bandwidth kernel scheduler routing ' +
  'prefill decode scaling gradient cache expert activation pipeline distributed dynamic cluster epoch ' +
  'inference token sampling prefetch adapter mixture routing context parallelism load dispatch bandwidth ' +
  'coherence gradient topology fabric kernel'
).split(' ');
const NOISE_CHARS = 'abcdefghijklmnopqrstuvwxyz ';

/** `--foo-bar` / `foo_bar` → `fooBar`, so the script's spellings work in YAML. */
function camelKeys(v: unknown): unknown {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v))
    out[k.replace(/[-_]+([a-z])/g, (_, c: string) => c.toUpperCase())] = x;
  return out;
}

const count = z.number().int().nonnegative();

export const heimdallParamsSchema = z.preprocess(
  camelKeys,
  z.strictObject({
    model: z.string().min(1).default('meta-llama/Llama-3.3-70B-Instruct'),
    /** The script posts to /v1/completions. */
    api: ApiSchema.default('openai-completions'),
    /** Logical workers behind the router (for sizing rationale only, as in the script). */
    workers: z.number().int().positive().default(4),
    /** Total requests, seeds and inline heavies included. */
    total: count.default(1000),
    heavySeeds: count.default(2),
    inlineEvery: count.default(50),
    /** Explicit number of inline heavies (0 = auto from inlineEvery). */
    inlineHeavyCount: count.default(0),
    seedInterval: seconds.default(0.05),
    burstStart: seconds.default(0.3),
    burstInterval: seconds.default(0.01),
    jitter: seconds.default(0.003),
    inlineExtraGap: seconds.default(0.06),
    /** Per-request timeout, seconds (passed on as WorkloadRequest.timeoutS). */
    timeout: positiveSeconds.default(600),
  }),
);
export type HeimdallParams = z.input<typeof heimdallParamsSchema>;

type Kind = 'HEAVY' | 'SHORT' | 'MED' | 'HEAVY_INLINE';
interface Item {
  readonly id: string;
  readonly kind: Kind;
  readonly isl: number;
  readonly osl: number;
}

function randint(rng: () => number, a: number, b: number): number {
  return a + Math.floor(rng() * (b - a + 1));
}

function mkId(prefix: string, i: number, width: number): string {
  return prefix + String(i).padStart(width, '0');
}

/** `build_workload`: the ordered list of requests (seeds, then the burst with inline heavies). */
export function buildHeimdallWorkload(p: z.output<typeof heimdallParamsSchema>, rng: () => number): Item[] {
  const out: Item[] = [];
  for (let i = 0; i < p.heavySeeds; i++) {
    const [isl, osl] = HEAVY_SPECS[i % HEAVY_SPECS.length]!;
    out.push({ id: mkId('S', i + 1, 3) + '_HEAVY', kind: 'HEAVY', isl, osl });
  }
  const remaining = Math.max(0, p.total - p.heavySeeds);
  const inlineHeavyCount =
    p.inlineHeavyCount > 0
      ? Math.min(p.inlineHeavyCount, remaining)
      : Math.floor(remaining / (p.inlineEvery + 1));
  const nonHeavy = Math.max(0, remaining - inlineHeavyCount);
  const shortCnt = Math.floor(nonHeavy / 2);
  const mediumCnt = nonHeavy - shortCnt;

  const pool: { kind: Kind; isl: number; osl: number }[] = [];
  for (let i = 0; i < shortCnt; i++)
    pool.push({ kind: 'SHORT', isl: randint(rng, 10, 20), osl: randint(rng, 25, 40) });
  for (let i = 0; i < mediumCnt; i++)
    pool.push({ kind: 'MED', isl: randint(rng, 120, 180), osl: randint(rng, 60, 90) });
  // Fisher–Yates from the end, as Python's random.shuffle.
  for (let i = pool.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [pool[i], pool[j]] = [pool[j]!, pool[i]!];
  }

  const inlinePos: number[] = [];
  if (inlineHeavyCount > 0 && pool.length > 0) {
    const step = Math.max(1, Math.floor(pool.length / inlineHeavyCount));
    for (let k = 0; k < inlineHeavyCount; k++) inlinePos.push(Math.min(pool.length, (k + 1) * step));
  }
  let inlineUsed = 0;
  let heavyCursor = 0;
  const counters = { SHORT: 0, MED: 0, HEAVY_INLINE: 0 };
  const push = (kind: Exclude<Kind, 'HEAVY'>, isl: number, osl: number): void => {
    const n = ++counters[kind];
    const id =
      kind === 'SHORT'
        ? mkId('B', n, 4) + '_SHORT'
        : kind === 'MED'
          ? mkId('M', n, 4) + '_MED'
          : mkId('I', n, 3) + '_HEAVY';
    out.push({ id, kind, isl, osl });
  };
  pool.forEach((item, i) => {
    push(item.kind as Exclude<Kind, 'HEAVY'>, item.isl, item.osl);
    if (inlineUsed < inlinePos.length && i + 1 === inlinePos[inlineUsed]) {
      const [isl, osl] = HEAVY_SPECS[heavyCursor % HEAVY_SPECS.length]!;
      push('HEAVY_INLINE', isl, osl);
      heavyCursor++;
      inlineUsed++;
    }
  });
  return out;
}

/** `build_schedule`: seeds every seedInterval, then the burst with jitter and post-heavy gaps. */
export function heimdallSchedule(
  p: z.output<typeof heimdallParamsSchema>,
  items: readonly Item[],
  rng: () => number,
): number[] {
  const times: number[] = [];
  const seeds = Math.min(p.heavySeeds, items.length);
  for (let i = 0; i < seeds; i++) times.push(i * p.seedInterval);
  let t = p.burstStart;
  for (let i = seeds; i < items.length; i++) {
    times.push(t);
    let dt = p.burstInterval + (p.jitter > 0 ? (rng() * 2 - 1) * p.jitter : 0);
    if (items[i]!.kind === 'HEAVY_INLINE') dt += p.inlineExtraGap;
    t += Math.max(0, dt);
  }
  return times;
}

/** `make_prompt`, from pools so hundreds of 4000-word prompts cost little. */
class PromptMaker {
  private readonly words: string;
  private readonly starts: number[];
  private readonly noise: string;
  private static readonly POOL_WORDS = 8192;
  private static readonly NOISE_POOL = 8192;

  constructor(private readonly rng: () => number) {
    const parts: string[] = [];
    this.starts = [];
    let off = 0;
    for (let i = 0; i < PromptMaker.POOL_WORDS; i++) {
      const w = VOCAB[Math.floor(rng() * VOCAB.length)]!;
      this.starts.push(off);
      parts.push(w);
      off += w.length + 1;
    }
    this.starts.push(off);
    this.words = parts.join(' ') + ' ';
    let noise = '';
    for (let i = 0; i < PromptMaker.NOISE_POOL; i++)
      noise += NOISE_CHARS[Math.floor(rng() * NOISE_CHARS.length)];
    this.noise = noise;
  }

  private wordRun(n: number): string {
    const N = PromptMaker.POOL_WORDS;
    if (n <= 0) return '';
    let out = '';
    let left = n;
    while (left > 0) {
      const take = Math.min(left, N);
      const i = Math.floor(this.rng() * (N - take + 1));
      if (out) out += ' ';
      out += this.words.slice(this.starts[i]!, this.starts[i + take]! - 1);
      left -= take;
    }
    return out;
  }

  make(words: number, tag: string): string {
    const k = Math.min(words * 5, 2000);
    const at = Math.floor(this.rng() * (PromptMaker.NOISE_POOL - k + 1));
    const text = `[${tag}] ${this.wordRun(words)} ${this.noise.slice(at, at + k)}`;
    return text.length > 65000 ? text.slice(0, 65000) : text;
  }
}

export function heimdallWorkload(params: HeimdallParams, seed: number): ClientDriver {
  const p = parseParams(heimdallParamsSchema, params);
  return openLoop(() => {
    const items = buildHeimdallWorkload(p, createRng(deriveSeed(seed, 'heimdall-build')));
    const times = heimdallSchedule(p, items, createRng(deriveSeed(seed, 'heimdall-schedule')));
    const prompts = new PromptMaker(createRng(deriveSeed(seed, 'heimdall-text')));
    return items.map((it, i): ScheduledRequest => ({
      at: times[i]!,
      request: {
        ...requestFromMessages(
          { id: it.id, model: p.model, api: p.api, outputTokens: it.osl, maxTokens: it.osl, label: it.kind },
          [{ role: 'user', content: prompts.make(it.isl, it.id) }],
        ),
        timeoutS: p.timeout,
      },
    }));
  });
}
