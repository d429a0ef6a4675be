/**
 * Tree of Thoughts (closed loop; SkyLB §5): each client solves questions one tree at a time. A
 * tree has `depth` levels and `branching` children per node — branching 2, depth 4 gives
 * 1 + 2 + 4 + 8 = 15 requests, the seed's "2-branch structure (15 requests per tree)". When a node
 * finishes, its children are sent at once; a child's prompt is its parent's prompt + the parent's
 * answer + a short instruction naming the branch, so siblings share everything up to the branch
 * and every node shares the root question (the prefix reuse the seed describes). The client starts
 * its next tree `thinkTimeS` after every node of the current one is done.
 *
 * sessionKey = `${idPrefix}${client}-${tree}` (the seed hashes on the question id); node ids are
 * `${sessionKey}-n${i}` with i the breadth-first index (children of i are b·i+1 … b·i+b).
 * A failed node drops its subtree.
 */
import { z } from 'zod';
import { createRng, deriveSeed } from '../core/rng.js';
import {
  ApiSchema,
  DEFAULT_MODEL,
  parseParams,
  positiveInt,
  positiveSeconds,
  requestFromMessages,
  seconds,
  SystemPromptSchema,
} from './common.js';
import { DistSchema, sample, sampleInt } from './dist.js';
import { systemPrompt, TextSource } from './text.js';
import type { ChatMessage, ClientDriver, ScheduledRequest } from './types.js';

export const treeOfThoughtParamsSchema = z
  .strictObject({
    clients: positiveInt.default(4),
    branching: positiveInt.default(2),
    /** Levels, root included. */
    depth: positiveInt.default(4),
    /** Trees per client; absent = keep going until durationS. */
    trees: positiveInt.optional(),
    /** Tokens of the question (root user message), e.g. a GSM8K problem. */
    questionTokens: DistSchema.default({ dist: 'uniform', min: 60, max: 200 }),
    /** Tokens of each thought (one node's answer). */
    outputTokens: DistSchema.default({ dist: 'uniform', min: 60, max: 200 }),
    /** Shared instruction before every question. */
    systemPrompt: SystemPromptSchema.default({ tokens: 120, variants: 1 }),
    /** Seconds between a tree's last answer and the client's next tree. */
    thinkTimeS: DistSchema.default({ dist: 'fixed', value: 0 }),
    /** Clients start uniformly within [0, startSpreadS). */
    startSpreadS: seconds.default(1),
    durationS: positiveSeconds.optional(),
    model: z.string().min(1).default(DEFAULT_MODEL),
    api: ApiSchema.default('openai-completions'),
    maxTokens: positiveInt.optional(),
    idPrefix: z.string().default('t'),
  })
  .refine((p) => p.durationS !== undefined || p.trees !== undefined, {
    message: 'give durationS or trees (or both)',
    path: ['durationS'],
  });
export type TreeOfThoughtParams = z.input<typeof treeOfThoughtParamsSchema>;

/** Nodes in a full tree: 1 + b + b² + … + b^(d−1). */
export function treeSize(branching: number, depth: number): number {
  let n = 0;
  let level = 1;
  for (let i = 0; i < depth; i++) {
    n += level;
    level *= branching;
  }
  return n;
}

interface Client {
  readonly index: number;
  readonly rng: () => number;
  readonly textRng: () => number;
  tree: number;
  /** Nodes of the current tree sent and not yet finished. */
  outstanding: number;
}

interface Node {
  readonly client: Client;
  readonly key: string;
  readonly index: number;
  readonly level: number;
  readonly messages: readonly ChatMessage[];
  readonly outputTokens: number;
}

export function treeOfThoughtWorkload(params: TreeOfThoughtParams, seed: number): ClientDriver {
  const p = parseParams(treeOfThoughtParamsSchema, params);
  const end = p.durationS ?? Infinity;
  const text = new TextSource(seed);
  const systems: string[] = [];
  for (let v = 0; v < p.systemPrompt.variants; v++)
    systems.push(systemPrompt(seed, p.systemPrompt.tokens, v));
  const inFlight = new Map<string, Node>();

  const send = (
    client: Client,
    key: string,
    index: number,
    level: number,
    messages: ChatMessage[],
    at: number,
  ): ScheduledRequest => {
    const id = `${key}-n${index}`;
    const outputTokens = Math.max(1, sampleInt(p.outputTokens, client.rng));
    inFlight.set(id, { client, key, index, level, messages, outputTokens });
    client.outstanding++;
    const request = requestFromMessages(
      { id, model: p.model, api: p.api, outputTokens, maxTokens: p.maxTokens, sessionKey: key },
      messages,
    );
    return { at, request };
  };

  const startTree = (c: Client, at: number): ScheduledRequest[] => {
    if (at >= end || (p.trees !== undefined && c.tree >= p.trees)) return [];
    c.tree++;
    const key = `${p.idPrefix}${c.index}-${c.tree}`;
    const sys = systems.length > 1 ? systems[Math.floor(c.rng() * systems.length)]! : systems[0];
    const question = text.fill(
      c.textRng,
      sampleInt(p.questionTokens, c.rng),
      `[${key}] Question: `,
      '\nPropose the next step of the solution.',
    );
    const messages: ChatMessage[] = sys
      ? [
          { role: 'system', content: sys },
          { role: 'user', content: question },
        ]
      : [{ role: 'user', content: question }];
    return [send(c, key, 0, 0, messages, at)];
  };

  return {
    start(): ScheduledRequest[] {
      inFlight.clear();
      const out: ScheduledRequest[] = [];
      for (let i = 0; i < p.clients; i++) {
        const c: Client = {
          index: i,
          rng: createRng(deriveSeed(seed, `client:${i}`)),
          textRng: createRng(deriveSeed(seed, `client-text:${i}`)),
          tree: 0,
          outstanding: 0,
        };
        out.push(...startTree(c, c.rng() * p.startSpreadS));
      }
      return out.sort((a, b) => a.at - b.at);
    },

    onFinish(id: string, now: number, ok: boolean, outputText: string): ScheduledRequest[] {
      const node = inFlight.get(id);
      if (!node) return [];
      inFlight.delete(id);
      const c = node.client;
      c.outstanding--;
      const out: ScheduledRequest[] = [];
      if (ok && node.level + 1 < p.depth && now < end) {
        const answer = outputText !== '' ? outputText : text.tokens(c.textRng, node.outputTokens);
        const prefix: ChatMessage[] = [...node.messages, { role: 'assistant', content: answer }];
        for (let k = 0; k < p.branching; k++) {
          const instruction = `Branch ${k + 1} of ${p.branching} at step ${node.level + 2}: continue from here.`;
          const messages: ChatMessage[] = [...prefix, { role: 'user', content: instruction }];
          out.push(send(c, node.key, node.index * p.branching + k + 1, node.level + 1, messages, now));
        }
      }
      if (c.outstanding === 0) out.push(...startTree(c, now + sample(p.thinkTimeS, c.rng)));
      return out;
    },
  };
}
