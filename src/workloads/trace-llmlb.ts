/**
 * The llmlb trace format (JSONL, one request per line; also what `serve` captures, src/trace/):
 * each line checked against TraceLineSchema — the fields of WorkloadRequest plus `at` (seconds from
 * start), `promptTokens`, the prompt's block hashes and what a capture records for reports. The
 * public formats are beside it (trace-mooncake.ts, trace-azure.ts, trace-burstgpt.ts); the replay
 * that reads them all is trace.ts.
 */
import { z } from 'zod';
import { ApiSchema, positiveInt } from './common.js';
import { LineError, type TraceFormat } from './trace-format.js';

const MessageSchema = z.strictObject({
  role: z.enum(['system', 'user', 'assistant']),
  content: z.string(),
});

/** Block size of a captured trace line that gives `blocks` without `blockTokens`. */
export const DEFAULT_BLOCK_TOKENS = 64;

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
    /** Hash chain of the prompt's blocks (a capture's record; text is then not needed). */
    blocks: z.array(z.union([z.string().min(1), z.number().int()])).optional(),
    blockTokens: positiveInt.optional(),
    /** What a capture records about how the request went (reports and `llmlb profile --trace`). */
    backend: z.string().optional(),
    ttftS: z.number().finite().nonnegative().optional(),
    e2eS: z.number().finite().nonnegative().optional(),
    status: z.number().int().optional(),
  })
  .refine((l) => l.prompt !== undefined || l.messages !== undefined || l.promptTokens !== undefined, {
    message: 'give prompt, messages or promptTokens',
    path: ['prompt'],
  })
  .refine((l) => l.prompt === undefined || l.messages === undefined, {
    message: 'give prompt or messages, not both',
    path: ['messages'],
  })
  .refine((l) => l.blocks === undefined || l.promptTokens !== undefined, {
    message: 'blocks need promptTokens',
    path: ['promptTokens'],
  });
export type TraceLine = z.output<typeof TraceLineSchema>;

/** The llmlb format: each line checked against TraceLineSchema. */
export const llmlbFormat: TraceFormat<TraceLine> = {
  name: 'llmlb',
  absoluteTime: false,
  detect: (line) => line.trimStart().startsWith('{') && line.includes('"at"'),
  reader: () => {
    const ids = new Set<string>();
    return (raw) => {
      let json: unknown;
      try {
        json = JSON.parse(raw);
      } catch (e) {
        throw new LineError(undefined, `not JSON (${(e as Error).message})`);
      }
      const r = TraceLineSchema.safeParse(json);
      if (!r.success) {
        const issue = r.error.issues[0]!;
        const path = issue.code === 'unrecognized_keys' ? [...issue.path, ...issue.keys] : issue.path;
        throw new LineError(path.join('.') || undefined, issue.message);
      }
      // Only explicit ids are remembered (generated ones are unique by line number).
      const id = r.data.id;
      if (id !== undefined) {
        if (ids.has(id)) throw new LineError('id', `duplicate id '${id}'`);
        ids.add(id);
      }
      return r.data;
    };
  },
};
