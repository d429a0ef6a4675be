/**
 * Multi-turn chat sessions (closed loop; SkyLB §5's ChatBot Arena / WildChat shape): `clients`
 * users, each running conversations one after another. A conversation has `turns` user messages;
 * every turn resends the whole history — system prompt, earlier user messages and the answers the
 * engine gave (the `outputText` passed to onFinish) — so consecutive turns share a growing prefix,
 * which is what prefix-aware routing exploits. The next turn goes out `thinkTimeS` after the answer.
 *
 * sessionKey = `${idPrefix}${client}-${conversation}` (the affinity key a session router hashes), or
 * with `sessionKeyBy: client` the user's own key `${idPrefix}${client}` for all their conversations
 * (SkyLB hashes on the user id). `userPrefixTokens` gives each user a fixed preamble of their own
 * (custom instructions, a document they keep asking about) that starts every conversation of theirs:
 * the within-user prefix similarity SkyLB §3.2 measures across a user's requests.
 * Request ids are `${idPrefix}${client}-${conversation}-${turn}`. Each client draws from its own seeded streams, so what a
 * client sends does not depend on the order in which other clients' requests finish.
 * A failed turn ends its conversation (the user gives up); the next one starts after a gap.
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

export const multiTurnParamsSchema = z
  .strictObject({
    clients: positiveInt.default(16),
    /** Conversations per client; absent = keep going until durationS. */
    conversations: positiveInt.optional(),
    /** User turns per conversation. */
    turns: DistSchema.default({ dist: 'uniform', min: 2, max: 8 }),
    /** Seconds from an answer to the next user message. */
    thinkTimeS: DistSchema.default({ dist: 'exponential', mean: 5 }),
    /** Seconds between a conversation's end and the client's next one (default: thinkTimeS). */
    conversationGapS: DistSchema.optional(),
    /** The affinity key: one per conversation, or one per user (client) across their conversations. */
    sessionKeyBy: z.enum(['conversation', 'client']).default('conversation'),
    /** Tokens of each user's own preamble (drawn once per user; 0 = none). */
    userPrefixTokens: DistSchema.default({ dist: 'fixed', value: 0 }),
    /** The system prompt every conversation starts with (shared across clients). */
    systemPrompt: SystemPromptSchema.default({ tokens: 200, variants: 1 }),
    /** Tokens of each new user message. */
    userTokens: DistSchema.default({ dist: 'uniform', min: 20, max: 200 }),
    /** Tokens of each answer (the hint only the engine reads). */
    outputTokens: DistSchema.default({ dist: 'uniform', min: 50, max: 400 }),
    /** Clients start uniformly within [0, startSpreadS). */
    startSpreadS: seconds.default(10),
    /** No request is sent at or after durationS (the scenario fills it in). */
    durationS: positiveSeconds.optional(),
    model: z.string().min(1).default(DEFAULT_MODEL),
    api: ApiSchema.default('openai-chat'),
    maxTokens: positiveInt.optional(),
    idPrefix: z.string().default('c'),
  })
  .refine((p) => p.durationS !== undefined || p.conversations !== undefined, {
    message: 'give durationS or conversations (or both)',
    path: ['durationS'],
  });
export type MultiTurnParams = z.input<typeof multiTurnParamsSchema>;

interface Client {
  readonly index: number;
  /** Lengths, think times, turn counts. */
  readonly rng: () => number;
  readonly textRng: () => number;
  conversation: number;
  turn: number;
  turns: number;
  messages: ChatMessage[];
  /** The user's own preamble ('' = none). */
  readonly preamble: string;
  /** Output tokens of the turn in flight (to synthesize an answer when none is given). */
  pendingOutput: number;
}

export function multiTurnWorkload(params: MultiTurnParams, seed: number): ClientDriver {
  const p = parseParams(multiTurnParamsSchema, params);
  const end = p.durationS ?? Infinity;
  const text = new TextSource(seed);
  const systems: string[] = [];
  for (let v = 0; v < p.systemPrompt.variants; v++)
    systems.push(systemPrompt(seed, p.systemPrompt.tokens, v));
  const gap = p.conversationGapS ?? p.thinkTimeS;
  const inFlight = new Map<string, Client>();

  const sendTurn = (c: Client, at: number): ScheduledRequest[] => {
    if (at >= end) return [];
    c.turn++;
    const conv = `${p.idPrefix}${c.index}-${c.conversation}`;
    const key = p.sessionKeyBy === 'client' ? `${p.idPrefix}${c.index}` : conv;
    const head = `[${conv} turn ${c.turn}] `;
    c.messages.push({ role: 'user', content: text.fill(c.textRng, sampleInt(p.userTokens, c.rng), head) });
    const id = `${conv}-${c.turn}`;
    c.pendingOutput = Math.max(1, sampleInt(p.outputTokens, c.rng));
    inFlight.set(id, c);
    const request = requestFromMessages(
      {
        id,
        model: p.model,
        api: p.api,
        outputTokens: c.pendingOutput,
        maxTokens: p.maxTokens,
        sessionKey: key,
      },
      c.messages.slice(), // a snapshot: later turns append to the client's history
    );
    return [{ at, request }];
  };

  const startConversation = (c: Client, at: number): ScheduledRequest[] => {
    if (at >= end || (p.conversations !== undefined && c.conversation >= p.conversations)) return [];
    c.conversation++;
    c.turn = 0;
    c.turns = Math.max(1, sampleInt(p.turns, c.rng));
    const sys = systems.length > 1 ? systems[Math.floor(c.rng() * systems.length)]! : systems[0];
    c.messages = sys ? [{ role: 'system', content: sys }] : [];
    if (c.preamble !== '') c.messages.push({ role: 'system', content: c.preamble });
    return sendTurn(c, at);
  };

  return {
    start(): ScheduledRequest[] {
      inFlight.clear();
      const out: ScheduledRequest[] = [];
      for (let i = 0; i < p.clients; i++) {
        // Its own stream, so a preamble (or none) leaves every other draw of the client unchanged.
        const userRng = createRng(deriveSeed(seed, `client-user:${i}`));
        const preambleTokens = sampleInt(p.userPrefixTokens, userRng);
        const c: Client = {
          index: i,
          rng: createRng(deriveSeed(seed, `client:${i}`)),
          textRng: createRng(deriveSeed(seed, `client-text:${i}`)),
          conversation: 0,
          turn: 0,
          turns: 0,
          messages: [],
          preamble: preambleTokens > 0 ? text.fill(userRng, preambleTokens, `[user ${p.idPrefix}${i}] `) : '',
          pendingOutput: 0,
        };
        out.push(...startConversation(c, c.rng() * p.startSpreadS));
      }
      return out.sort((a, b) => a.at - b.at);
    },

    onFinish(id: string, now: number, ok: boolean, outputText: string): ScheduledRequest[] {
      const c = inFlight.get(id);
      if (!c) return [];
      inFlight.delete(id);
      if (ok && c.turn < c.turns) {
        // A simulator may pass '' to save work: synthesize an answer of the hinted length so the
        // history (and so the prompt sizes) grows the same way.
        const answer = outputText !== '' ? outputText : text.tokens(c.textRng, c.pendingOutput);
        c.messages.push({ role: 'assistant', content: answer });
        return sendTurn(c, now + sample(p.thinkTimeS, c.rng));
      }
      return startConversation(c, now + sample(gap, c.rng));
    },
  };
}
