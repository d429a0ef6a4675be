/**
 * The emulated engine's embeddings (OpenAI's /v1/embeddings, Ollama's /api/embed and the older
 * /api/embeddings): answered at once, outside the batch, as deterministic unit vectors of the inputs.
 */
import { createHash } from 'node:crypto';
import { endpoint } from '../api/endpoints.js';
import { modelOr404, type EngineContext, type Route } from './context.js';
import { HttpError, readJson, sendJson, type Obj } from './http.js';
import { countTokens } from './tokens.js';
import type { ErrorFormat } from './wire.js';

/** Length of the emulated embedding vectors (unless a request asks for `dimensions`). */
const EMBEDDING_DIMS = 32;

/** A deterministic unit vector for a text: equal texts embed equally, different ones differently. */
export function embed(text: string, dims: number): number[] {
  const v: number[] = [];
  for (let block = 0; v.length < dims; block++) {
    const h = createHash('sha256').update(`${block}\0${text}`).digest();
    for (let i = 0; i + 1 < h.length && v.length < dims; i += 2) v.push(h.readUInt16BE(i) / 32768 - 1);
  }
  const norm = Math.hypot(...v) || 1;
  return v.map((x) => x / norm);
}

const inputs = (v: unknown): string[] => {
  if (typeof v === 'string') return [v];
  if (Array.isArray(v)) return v.map((x) => (typeof x === 'string' ? x : JSON.stringify(x)));
  throw new HttpError(400, 'input must be a string or an array of strings', 'invalid_input');
};

const dims = (b: Obj): number =>
  typeof b.dimensions === 'number' && Number.isInteger(b.dimensions) && b.dimensions >= 1
    ? Math.min(b.dimensions, 4096)
    : EMBEDDING_DIMS;

/** An embeddings route: counted as a request, the body's model checked, answered at once. */
const embeddings = (
  ctx: EngineContext,
  format: ErrorFormat,
  answer: (model: string, b: Obj) => object,
): Route => ({
  method: 'POST',
  format,
  handle: async (req, res) => {
    ctx.requests++;
    const b = await readJson(req);
    sendJson(res, 200, answer(modelOr404(ctx, format, b.model), b));
  },
});

export const openaiEmbeddingsRoute = (ctx: EngineContext): [string, Route] => [
  endpoint('openai-embeddings').path,
  embeddings(ctx, 'openai', (model, b) => {
    const texts = inputs(b.input);
    const tokens = texts.reduce((n, t) => n + countTokens(t), 0);
    return {
      object: 'list',
      // The openai SDK asks for base64 (little-endian float32) unless told otherwise.
      data: texts.map((t, index) => {
        const v = embed(t, dims(b));
        const embedding =
          b.encoding_format === 'base64' ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v;
        return { object: 'embedding', index, embedding };
      }),
      model,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    };
  }),
];

export const ollamaEmbeddingsRoutes = (ctx: EngineContext): [string, Route][] => [
  [
    endpoint('ollama-embed').path,
    embeddings(ctx, 'ollama', (model, b) => {
      const texts = inputs(b.input);
      return {
        model,
        embeddings: texts.map((t) => embed(t, dims(b))),
        total_duration: 1_000_000,
        load_duration: 0,
        prompt_eval_count: texts.reduce((n, t) => n + countTokens(t), 0),
      };
    }),
  ],
  [
    endpoint('ollama-embeddings').path,
    embeddings(ctx, 'ollama', (_model, b) => ({
      embedding: embed(typeof b.prompt === 'string' ? b.prompt : '', EMBEDDING_DIMS),
    })),
  ],
];
