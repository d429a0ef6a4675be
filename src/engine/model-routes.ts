/**
 * What the emulated engine says about its models: OpenAI's /v1/models (and /v1/models/{id}) as
 * vLLM lists them, and Ollama's /api/tags, /api/ps, /api/show, /api/version and `/` as Ollama
 * answers them — the probes a router reads models, context lengths and liveness from.
 */
import { createHash } from 'node:crypto';
import { endpoint } from '../api/endpoints.js';
import { modelOr404, type EngineContext, type Route } from './context.js';
import { readJson, send, sendJson, type Obj } from './http.js';

/** A fixed-looking digest for a model name, so /api/tags and /api/ps look like Ollama's. */
const digestOf = (name: string): string => createHash('sha256').update(name).digest('hex');

/**
 * A model as vLLM lists it: `root` and `max_model_len` are what clients read the context length
 * from. An adapter as vLLM lists a LoRA module: `root` its path, `parent` the base model it runs on.
 */
const modelEntry = (ctx: EngineContext, id: string): Obj =>
  ctx.adapters.includes(id)
    ? {
        id,
        object: 'model',
        created: 0,
        owned_by: 'llmlb',
        root: `/adapters/${id}`,
        parent: ctx.baseModels[0],
        max_model_len: ctx.contextLength,
      }
    : { id, object: 'model', created: 0, owned_by: 'llmlb', root: id, max_model_len: ctx.contextLength };

export const openaiModelsRoute = (ctx: EngineContext): [string, Route] => [
  '/v1/models',
  {
    method: 'GET',
    format: 'openai',
    probe: true,
    handle: (_req, res) =>
      sendJson(res, 200, {
        object: 'list',
        data: ctx.models.map((m) => modelEntry(ctx, m)),
      }),
  },
];

/** GET /v1/models/{id}: the model's entry, or OpenAI's 404. */
export const openaiModelRoute = (ctx: EngineContext, id: string): Route => ({
  method: 'GET',
  format: 'openai',
  handle: (_q, res) => {
    modelOr404(ctx, 'openai', id);
    sendJson(res, 200, modelEntry(ctx, id));
  },
});

/** A model as Ollama's /api/tags lists it. */
const ollamaEntry = (ctx: EngineContext, m: string): Obj => ({
  name: m,
  model: m,
  modified_at: ctx.startedAt,
  size: 4_661_224_676,
  digest: digestOf(m),
  details: {
    parent_model: '',
    format: 'gguf',
    family: 'llama',
    families: ['llama'],
    parameter_size: '8.0B',
    quantization_level: 'Q4_0',
  },
});

export const ollamaModelRoutes = (ctx: EngineContext): [string, Route][] => [
  [
    endpoint('ollama-show').path,
    {
      method: 'POST',
      format: 'ollama',
      handle: async (req, res) => {
        const b = await readJson(req);
        const m = modelOr404(ctx, 'ollama', b.model ?? b.name);
        sendJson(res, 200, {
          license: '',
          modelfile: `FROM ${m}\n`,
          parameters: 'stop "<|eot_id|>"',
          template: '{{ .Prompt }}',
          details: ollamaEntry(ctx, m).details,
          model_info: {
            'general.architecture': 'llama',
            'general.parameter_count': 8_030_261_248,
            'llama.context_length': ctx.contextLength,
          },
          capabilities: ['completion'],
          modified_at: ctx.startedAt,
        });
      },
    },
  ],
  [
    '/api/tags',
    {
      method: 'GET',
      format: 'ollama',
      probe: true,
      handle: (_q, res) => sendJson(res, 200, { models: ctx.models.map((m) => ollamaEntry(ctx, m)) }),
    },
  ],
  [
    '/api/version',
    {
      method: 'GET',
      format: 'ollama',
      probe: true,
      handle: (_q, res) => sendJson(res, 200, { version: '0.9.0' }),
    },
  ],
  [
    '/api/ps',
    {
      method: 'GET',
      format: 'ollama',
      probe: true,
      handle: (_q, res) => {
        const s = ctx.driver.model.stats();
        sendJson(res, 200, {
          models: ctx.models.map((m) => ({
            ...ollamaEntry(ctx, m),
            expires_at: '2999-01-01T00:00:00Z',
            size_vram: 4_661_224_676,
          })),
          // llmlb extension: the engine's batch state, for scrapers that know it.
          llmlb: { running: s.running, waiting: s.waiting, slots: ctx.profile.slots, kvUsage: s.kvUsage },
        });
      },
    },
  ],
  [
    '/',
    {
      method: 'GET',
      format: 'ollama',
      probe: true,
      handle: (_q, res) => send(res, 200, 'Ollama is running', 'text/plain; charset=utf-8'),
    },
  ],
];
