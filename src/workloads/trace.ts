/**
 * Trace replay (open loop): a JSONL file, one request per line —
 *   {"at": 0.25, "model": "llama3", "prompt": "…", "outputTokens": 120}
 *   {"at": 0.40, "api": "openai-chat", "messages": [{"role": "user", "content": "…"}], "outputTokens": 80, "sessionKey": "u7"}
 *   {"at": 0.90, "promptTokens": 512, "outputTokens": 64}       ← lengths only: text is synthesized
 * Fields are those of WorkloadRequest plus `at` (seconds from start) and `promptTokens`; `id`
 * defaults to `l<line>`, `model`/`api` to the workload's. Blank lines are skipped. Lines may come
 * in any order; they are sent sorted by `at` (ties in file order). Errors name the line and field.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { createRng, deriveSeed } from '../core/rng.js';
import {
  ApiSchema,
  DEFAULT_MODEL,
  openLoop,
  parseParams,
  positiveInt,
  requestFromMessages,
} from './common.js';
import { TextSource } from './text.js';
import type { ChatMessage, ClientDriver, ScheduledRequest } from './types.js';

const MessageSchema = z.strictObject({
  role: z.enum(['system', 'user', 'assistant']),
  content: z.string(),
});

export const TraceLineSchema = z
  .strictObject({
    at: z.number().finite().nonnegative(),
    id: z.string().min(1).optional(),
    model: z.string().min(1).optional(),
    api: ApiSchema.optional(),
    prompt: z.string().optional(),
    messages: z.array(MessageSchema).min(1).optional(),
    /** Used only when neither prompt nor messages is given: a synthetic prompt of this length. */
    promptTokens: z.number().int().nonnegative().optional(),
    outputTokens: z.number().int().positive(),
    maxTokens: positiveInt.optional(),
    sessionKey: z.string().min(1).optional(),
    label: z.string().optional(),
    task: z.string().optional(),
    sizeClass: z.enum(['LL', 'LH', 'HL', 'HH']).optional(),
    timeoutS: z.number().finite().positive().optional(),
  })
  .refine((l) => l.prompt !== undefined || l.messages !== undefined || l.promptTokens !== undefined, {
    message: 'give prompt, messages or promptTokens',
    path: ['prompt'],
  })
  .refine((l) => l.prompt === undefined || l.messages === undefined, {
    message: 'give prompt or messages, not both',
    path: ['messages'],
  });
export type TraceLine = z.output<typeof TraceLineSchema>;

export const traceParamsSchema = z.strictObject({
  /** JSONL file; a scenario resolves a relative path against the scenario file's folder. */
  path: z.string().min(1),
  /** Replay speed: 2 sends the trace twice as fast (at / rateScale). */
  rateScale: z.number().finite().positive().default(1),
  /** Replay only the first `limit` lines (after sorting by time). */
  limit: positiveInt.optional(),
  /** Drop requests at or after durationS (the scenario fills it in). */
  durationS: z.number().finite().positive().optional(),
  /** Defaults for lines without their own. */
  model: z.string().min(1).default(DEFAULT_MODEL),
  api: ApiSchema.default('openai-completions'),
});
export type TraceParams = z.input<typeof traceParamsSchema>;

/** A bad trace line: `source:line: field: problem`. */
export class TraceError extends Error {
  constructor(
    readonly source: string,
    readonly line: number,
    readonly field: string | undefined,
    problem: string,
  ) {
    super(`${source}:${line}: ${field ? `${field}: ` : ''}${problem}`);
    this.name = 'TraceError';
  }
}

/** Parse JSONL text into validated lines with their line numbers. Throws TraceError. */
export function parseTrace(text: string, source: string): { line: number; entry: TraceLine }[] {
  const out: { line: number; entry: TraceLine }[] = [];
  const ids = new Set<string>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.trim();
    if (raw === '') continue;
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (e) {
      throw new TraceError(source, i + 1, undefined, `not JSON (${(e as Error).message})`);
    }
    const r = TraceLineSchema.safeParse(json);
    if (!r.success) {
      const issue = r.error.issues[0]!;
      const path = issue.code === 'unrecognized_keys' ? [...issue.path, ...issue.keys] : issue.path;
      throw new TraceError(source, i + 1, path.join('.') || undefined, issue.message);
    }
    const id = r.data.id ?? `l${i + 1}`;
    if (ids.has(id)) throw new TraceError(source, i + 1, 'id', `duplicate id '${id}'`);
    ids.add(id);
    out.push({ line: i + 1, entry: { ...r.data, id } });
  }
  return out;
}

export function traceWorkload(params: TraceParams, seed: number): ClientDriver {
  const p = parseParams(traceParamsSchema, params);
  // Read and validate now, so a scenario with a bad trace fails at load, not mid-run.
  const lines = parseTrace(readFileSync(p.path, 'utf8'), p.path);
  return openLoop(() => {
    const text = new TextSource(seed);
    const rng = createRng(deriveSeed(seed, 'trace-text'));
    const sorted = lines
      .map((l, order) => ({ ...l, order }))
      .sort((a, b) => a.entry.at - b.entry.at || a.order - b.order);
    const out: ScheduledRequest[] = [];
    for (const { entry: e } of sorted) {
      if (p.limit !== undefined && out.length >= p.limit) break;
      const at = e.at / p.rateScale;
      if (p.durationS !== undefined && at >= p.durationS) break;
      const id = e.id!;
      const messages: ChatMessage[] = e.messages ?? [
        { role: 'user', content: e.prompt ?? text.fill(rng, e.promptTokens ?? 0, `[${id}] `) },
      ];
      const request = requestFromMessages(
        {
          id,
          model: e.model ?? p.model,
          api: e.api ?? p.api,
          outputTokens: e.outputTokens,
          maxTokens: e.maxTokens,
          sessionKey: e.sessionKey,
          label: e.label,
          task: e.task,
          sizeClass: e.sizeClass,
        },
        messages,
      );
      out.push({ at, request: e.timeoutS !== undefined ? { ...request, timeoutS: e.timeoutS } : request });
    }
    return out;
  });
}
