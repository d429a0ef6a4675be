/**
 * The emulated engine's route table: the generation routes from the endpoint descriptors
 * (src/api), embeddings, the model listings, and the operator's pages (/metrics as vLLM's,
 * /healthz, /_emulator/stats and /_emulator/faults). Paths are matched exactly; /v1/models/{id}
 * is the one pattern (`openaiModelRoute`, looked up by the server).
 */
import { messagesPromptText, toolsText } from '../api/anthropic.js';
import { endpoint, ENDPOINTS } from '../api/endpoints.js';
import { engineStats, modelCounts, modelOr404, type EngineContext, type Route } from './context.js';
import { ollamaEmbeddingsRoutes, openaiEmbeddingsRoute } from './embeddings.js';
import { parseFaults } from './faults.js';
import { slotCacheInfo } from './slot-cache.js';
import type { Generate } from './generate.js';
import { HttpError, readJson, send, sendJson } from './http.js';
import { prometheusText } from './metrics.js';
import { ollamaModelRoutes, openaiModelsRoute } from './model-routes.js';
import { countTokens } from './tokens.js';

/**
 * Generation routes from the descriptors. Ollama serves the OpenAI-compatible routes too, so every
 * engine has them; the Ollama API only with `api: ollama | both`. The Responses API unless
 * `responses: false`, Anthropic's Messages (and count_tokens) only with `messages: true`.
 */
function generationRoutes(
  ctx: EngineContext,
  generate: Generate,
  opts: { readonly responses?: boolean; readonly messages?: boolean },
): [string, Route][] {
  const routes: [string, Route][] = [];
  for (const e of ENDPOINTS) {
    if (!e.engineGeneration || (e.family === 'ollama' && !ctx.ollama)) continue;
    const kind = e.name;
    const optional =
      kind === 'openai-responses'
        ? opts.responses !== false
        : kind === 'anthropic-messages'
          ? opts.messages === true
          : undefined;
    if (optional === undefined)
      routes.push([
        e.path,
        { method: 'POST', format: e.family, handle: (req, res) => generate(kind, req, res) },
      ]);
    else if (optional)
      routes.push([
        e.path,
        {
          method: 'POST',
          format: e.family,
          handle: async (req, res) => {
            const b = await readJson(req);
            // A body without a model is refused before it counts as a request or draws a fault, so
            // the router's capability check (an empty body) leaves seeded runs as they were.
            modelOr404(ctx, e.family, b.model);
            return generate(kind, req, res, b);
          },
        },
      ]);
  }
  if (opts.messages === true)
    routes.push([
      endpoint('anthropic-count-tokens').path,
      {
        method: 'POST',
        format: 'anthropic',
        handle: async (req, res) => {
          const b = await readJson(req);
          modelOr404(ctx, 'anthropic', b.model);
          if (!Array.isArray(b.messages))
            throw new HttpError(400, 'messages: Field required', 'missing_messages');
          sendJson(res, 200, { input_tokens: countTokens(messagesPromptText(b) + toolsText(b)) });
        },
      },
    ]);
  return routes;
}

/** The operator's pages: the metrics page (vLLM's names), health, and the emulator's own. */
function opsRoutes(ctx: EngineContext): [string, Route][] {
  const { driver, name, timeScale, profile } = ctx;
  const slotInfo = slotCacheInfo(profile);
  return [
    [
      '/metrics',
      {
        method: 'GET',
        format: 'ollama',
        handle: (_q, res) =>
          send(
            res,
            200,
            prometheusText(ctx.models, modelCounts(ctx), driver.model.kvUsage, driver.model.loraInfo()),
            'text/plain; version=0.0.4; charset=utf-8',
          ),
      },
    ],
    // cacheMode 'slots' is llama.cpp's server: its /props says the slots and each one's context.
    ...(slotInfo !== undefined
      ? ([
          [
            '/props',
            {
              method: 'GET',
              format: 'ollama',
              handle: (_q, res) =>
                sendJson(res, 200, {
                  total_slots: slotInfo.slots,
                  default_generation_settings: { n_ctx: slotInfo.slotTokens },
                }),
            },
          ],
        ] satisfies [string, Route][])
      : []),
    [
      '/healthz',
      { method: 'GET', format: 'ollama', handle: (_q, res) => sendJson(res, 200, { status: 'ok' }) },
    ],
    [
      '/_emulator/stats',
      {
        method: 'GET',
        format: 'ollama',
        handle: (_q, res) =>
          sendJson(res, 200, { name, timeScale, faults: ctx.faults, profile, ...engineStats(ctx) }),
      },
    ],
    [
      '/_emulator/faults',
      {
        method: 'POST',
        format: 'ollama',
        handle: async (req, res) => {
          ctx.faults = parseFaults(await readJson(req));
          sendJson(res, 200, { faults: ctx.faults });
        },
      },
    ],
  ];
}

/** Every exact path the engine serves (a later entry for the same path would replace an earlier). */
export function buildRoutes(
  ctx: EngineContext,
  generate: Generate,
  opts: { readonly responses?: boolean; readonly messages?: boolean },
): Map<string, Route> {
  return new Map<string, Route>([
    ...generationRoutes(ctx, generate, opts),
    openaiEmbeddingsRoute(ctx),
    openaiModelsRoute(ctx),
    ...(ctx.ollama ? ollamaEmbeddingsRoutes(ctx) : []),
    ...(ctx.ollama ? ollamaModelRoutes(ctx) : []),
    ...opsRoutes(ctx),
  ]);
}
