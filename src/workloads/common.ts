/**
 * Pieces shared by the generators: parameter schemas, building a WorkloadRequest from chat
 * messages (for every API), and the open-loop request shape (constant, Poisson, bursts).
 */
import { z } from 'zod';
import { isChatApi, WORKLOAD_APIS } from '../api/endpoints.js';
import { flattenMessages } from '../core/prompt.js';
import { createRng, deriveSeed } from '../core/rng.js';
import { DistSchema, sampleInt } from './dist.js';
import { systemPrompt, TextSource } from './text.js';
import type { ChatMessage, ClientDriver, ScheduledRequest, WorkloadRequest } from './types.js';

export const ApiSchema = z.enum(WORKLOAD_APIS);
export type Api = z.output<typeof ApiSchema>;

export const DEFAULT_MODEL = 'llama3';

export const positiveInt = z.number().int().positive();
export const nonNegInt = z.number().int().nonnegative();
export const seconds = z.number().finite().nonnegative();
export const positiveSeconds = z.number().finite().positive();

/** Parse params inside a factory (throws a ZodError naming the field). */
export function parseParams<S extends z.ZodType>(schema: S, params: unknown): z.output<S> {
  return schema.parse(params);
}

const isChat = (api: Api): boolean => isChatApi(api);

/** Fields of a request other than its text. */
export interface RequestMeta {
  readonly id: string;
  readonly model: string;
  readonly api: Api;
  readonly outputTokens: number;
  readonly maxTokens?: number | undefined;
  readonly sessionKey?: string | undefined;
  readonly label?: string | undefined;
  readonly task?: string | undefined;
  readonly taskHint?: string | undefined;
  readonly sizeClass?: WorkloadRequest['sizeClass'];
}

/**
 * A request carrying `messages`: as they are for chat APIs, flattened (contents joined with '\n',
 * the router's and engine's own rule) into `prompt` for generate/completions, so the text the
 * router sees is the same whichever API the scenario picks.
 */
export function requestFromMessages(meta: RequestMeta, messages: readonly ChatMessage[]): WorkloadRequest {
  // Field by field, in RequestMeta's order, leaving out the undefined ones (a field added to
  // RequestMeta must be added here). Neither `delete` (it turns an object into a slow dictionary,
  // and the simulator reads these fields on every event) nor a spread and copy by key (building
  // the workload was a tenth of a mixed-4x run).
  const r: { -readonly [K in keyof WorkloadRequest]: WorkloadRequest[K] } = {
    id: meta.id,
    model: meta.model,
    api: meta.api,
    outputTokens: meta.outputTokens,
  };
  if (meta.maxTokens !== undefined) r.maxTokens = meta.maxTokens;
  if (meta.sessionKey !== undefined) r.sessionKey = meta.sessionKey;
  if (meta.label !== undefined) r.label = meta.label;
  if (meta.task !== undefined) r.task = meta.task;
  if (meta.taskHint !== undefined) r.taskHint = meta.taskHint;
  if (meta.sizeClass !== undefined) r.sizeClass = meta.sizeClass;
  if (isChat(meta.api)) r.messages = messages;
  else r.prompt = flattenMessages(messages);
  return r;
}

/** A driver for open-loop traffic: everything is scheduled up front; finishes send nothing. */
export function openLoop(generate: () => ScheduledRequest[]): ClientDriver {
  let list: readonly ScheduledRequest[] | undefined;
  return {
    // Built once, however many runs the driver serves (ClientDriver.reusable); a new array each
    // time, as callers may sort or filter theirs.
    start: () => (list ??= generate()).slice(),
    onFinish: () => [],
    reusable: true,
  };
}

/** Shared system prompt (a fixed prefix of every request). */
export const SystemPromptSchema = z.strictObject({
  /** Its length in tokens. */
  tokens: nonNegInt,
  /** Distinct system prompts (e.g. applications); each request picks one uniformly. */
  variants: positiveInt.default(1),
});

/** What each open-loop request looks like (constant, poisson, bursts). */
export const requestShape = {
  model: z.string().min(1).default(DEFAULT_MODEL),
  api: ApiSchema.default('openai-completions'),
  /** Total prompt tokens, system prompt included (a prompt is never shorter than its fixed parts). */
  promptTokens: DistSchema.default({ dist: 'uniform', min: 64, max: 512 }),
  /** Output tokens the engine will generate (the hint only the engine reads). */
  outputTokens: DistSchema.default({ dist: 'uniform', min: 32, max: 256 }),
  /** Cap sent with the request (num_predict / max_tokens); absent = none. */
  maxTokens: positiveInt.optional(),
  systemPrompt: SystemPromptSchema.optional(),
  label: z.string().min(1).optional(),
  /** Request ids are `${idPrefix}${n}` (zero-padded). */
  idPrefix: z.string().default('r'),
  /**
   * LoRA: each request names one of `count` adapters as its model (`${prefix}${k}`, k zero-padded,
   * as an engine's `lora.adapters: { prefix, count }` names them), adapter k drawn with Zipf
   * popularity ∝ 1 / (k + 1)^zipf; `model` is then unused. Drawn from a stream of its own.
   */
  adapters: z
    .strictObject({
      prefix: z.string().min(1),
      count: positiveInt,
      zipf: z.number().finite().nonnegative().default(1),
    })
    .optional(),
};

/** Draws adapter names with Zipf popularity (requestShape.adapters). */
export class ZipfNames {
  private readonly cdf: Float64Array;
  private readonly names: string[];
  constructor(
    prefix: string,
    count: number,
    s: number,
    private readonly rng: () => number,
  ) {
    const width = String(Math.max(0, count - 1)).length;
    this.names = Array.from({ length: count }, (_, k) => `${prefix}${String(k).padStart(width, '0')}`);
    this.cdf = new Float64Array(count);
    let sum = 0;
    for (let k = 0; k < count; k++) this.cdf[k] = sum += 1 / Math.pow(k + 1, s);
    for (let k = 0; k < count; k++) this.cdf[k]! /= sum;
  }
  next(): string {
    const u = this.rng();
    let lo = 0;
    let hi = this.cdf.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.cdf[mid]! > u) hi = mid;
      else lo = mid + 1;
    }
    return this.names[lo]!;
  }
}

/** Arrival bounds shared by open-loop generators: stop at durationS or after count requests. */
export const arrivalBounds = {
  /** Requests are sent during [startS, durationS); the scenario fills it in from its own durationS. */
  durationS: positiveSeconds.optional(),
  /** Stop after this many requests (whichever of count / durationS comes first). */
  count: positiveInt.optional(),
  /** First possible send time. */
  startS: seconds.default(0),
};

/** Refinement for schemas with arrivalBounds: at least one bound. */
export function hasBound(p: { durationS?: number | undefined; count?: number | undefined }): boolean {
  return p.durationS !== undefined || p.count !== undefined;
}
export const NO_BOUND = { message: 'give durationS or count (or both)', path: ['durationS'] };

type ShapeParams = z.output<z.ZodObject<typeof requestShape>>;

/**
 * Builds open-loop requests of a given shape. Lengths, text and arrival times draw from separate
 * seeded streams, so changing the rate does not change request i's lengths or text.
 */
export class ShapedRequests {
  private readonly lengths: () => number;
  private readonly textRng: () => number;
  private readonly text: TextSource;
  private readonly systems: string[];
  private readonly width: number;
  private readonly adapters: ZipfNames | undefined;

  constructor(
    private readonly p: ShapeParams,
    seed: number,
    expected: number,
  ) {
    this.lengths = createRng(deriveSeed(seed, 'lengths'));
    this.textRng = createRng(deriveSeed(seed, 'text'));
    this.text = new TextSource(seed);
    const sp = p.systemPrompt;
    this.systems = [];
    if (sp && sp.tokens > 0)
      for (let v = 0; v < sp.variants; v++) this.systems.push(systemPrompt(seed, sp.tokens, v));
    this.width = Math.max(4, String(Math.max(0, expected - 1)).length);
    const a = p.adapters;
    this.adapters = a && new ZipfNames(a.prefix, a.count, a.zipf, createRng(deriveSeed(seed, 'adapters')));
  }

  /** The n-th request (call in order: draws advance the streams). */
  make(n: number): WorkloadRequest {
    const p = this.p;
    const id = `${p.idPrefix}${String(n).padStart(this.width, '0')}`;
    const promptTokens = sampleInt(p.promptTokens, this.lengths);
    const outputTokens = Math.max(1, sampleInt(p.outputTokens, this.lengths));
    const system =
      this.systems.length > 0 ? this.systems[Math.floor(this.lengths() * this.systems.length)]! : '';
    // Flattened text is system + '\n' + body: size the body so the whole is promptTokens tokens.
    const bodyTokens = system ? promptTokens - system.length / 4 : promptTokens;
    const body = this.text.fill(this.textRng, bodyTokens, `[${id}] `, '', system ? 1 : 0);
    const messages: ChatMessage[] = system
      ? [
          { role: 'system', content: system },
          { role: 'user', content: body },
        ]
      : [{ role: 'user', content: body }];
    return requestFromMessages(
      {
        id,
        model: this.adapters ? this.adapters.next() : p.model,
        api: p.api,
        outputTokens,
        maxTokens: p.maxTokens,
        label: p.label,
      },
      messages,
    );
  }
}
