/**
 * The emulated inference server (`llmlb engine`): a real node:http server with Ollama and
 * OpenAI/vLLM endpoints, answering from one EngineModel driven in real time. Batching, queueing,
 * prefix-cache hits and timings therefore behave like the simulator's, and the router under test
 * sees the same wire formats, metrics and failures as with real engines.
 *
 * This file is the server itself (options, dispatch, the probes' injected failures, shutdown); what
 * it serves is beside it: generation and its faults in `generate.ts`, the route table in
 * `routes.ts` (embeddings `embeddings.ts`, model listings `model-routes.ts`, the metrics page
 * `metrics.ts`), and the state they share in `context.ts`.
 */
import { createServer } from 'node:http';
import type { Socket } from 'node:net';
import { createRng, deriveSeed } from '../core/rng.js';
import { createContext, engineStats, type Route } from './context.js';
import { RealTimeDriver } from './driver.js';
import type { EngineFaults } from './faults.js';
import { createGenerate } from './generate.js';
import { HttpError, sendError } from './http.js';
import { EngineModel } from './model.js';
import { openaiModelRoute } from './model-routes.js';
import { buildRoutes } from './routes.js';
import type { EngineProfile, EngineStats } from './types.js';
import type { ErrorFormat } from './wire.js';

export { defaultProfile } from './profile.js';
export type { EngineFaults } from './faults.js';
export { OUTPUT_TOKENS_HEADER } from './generate.js';

export interface EngineServerOptions {
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** 0 = ephemeral. */
  readonly port: number;
  /** Which API families to serve. Ollama also serves /v1/*, so 'ollama' and 'both' serve both. */
  readonly api: 'ollama' | 'openai' | 'both';
  /** Default ['llama3']. */
  readonly models?: readonly string[];
  readonly profile: EngineProfile;
  /** Model seconds per real second (default 1): 100 runs the engine 100× faster than life. */
  readonly timeScale?: number;
  readonly seed?: number;
  /** Mean of the output length drawn when no `x-llmlb-output-tokens` hint is sent (default 128). */
  readonly defaultOutputTokens?: { readonly mean: number };
  readonly faults?: EngineFaults;
  /** Shown in sequence ids and /_emulator/stats. */
  readonly name?: string;
  /** Whether POST /v1/responses is served (default true; false plays an older engine without it). */
  readonly responses?: boolean;
  /**
   * Whether Anthropic's POST /v1/messages and /v1/messages/count_tokens are served (default false:
   * an engine without them, as vLLM; true plays Ollama ≥ 0.14, llama.cpp's server, SGLang).
   */
  readonly messages?: boolean;
  /** Context length reported (vLLM's `max_model_len` in /v1/models, Ollama's in /api/show); default 8192. */
  readonly contextLength?: number;
}

export interface EngineServer {
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
  /** Replace the fault settings (they apply to requests that arrive afterwards). */
  setFaults(f: EngineFaults): void;
  stats(): EngineStats & { requests: number };
}

export async function startEngine(opts: EngineServerOptions): Promise<EngineServer> {
  const host = opts.host ?? '127.0.0.1';
  const baseModels = opts.models && opts.models.length > 0 ? [...opts.models] : ['llama3'];
  const ctx = createContext({
    name: opts.name ?? 'engine',
    seed: opts.seed ?? 1,
    timeScale: opts.timeScale ?? 1,
    profile: opts.profile,
    driver: new RealTimeDriver(new EngineModel(opts.profile), opts.timeScale ?? 1),
    meanOutput: opts.defaultOutputTokens?.mean ?? 128,
    baseModels,
    // LoRA adapters are served as models of their own, on the first base model (as vLLM's --lora-modules).
    adapters: (opts.profile.lora?.adapters ?? []).filter((a) => !baseModels.includes(a)),
    ollama: opts.api === 'ollama' || opts.api === 'both',
    contextLength: opts.contextLength ?? 8192,
    startedAt: new Date().toISOString(),
    faults: opts.faults ?? {},
  });
  // Probes get their own stream, so their timing cannot shift which generation requests fail.
  const probeFailRng = createRng(deriveSeed(ctx.seed, 'fail-probe'));
  const sockets = new Set<Socket>();
  let closing: Promise<void> | undefined;
  // Simulated crash: the box is gone, sockets and all (shutdown only resolves).
  const generate = createGenerate(ctx, () => void shutdown().catch(() => undefined));
  const routes = buildRoutes(ctx, generate, opts);

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    const route: Route | undefined =
      routes.get(path) ??
      (path.startsWith('/v1/models/')
        ? openaiModelRoute(ctx, decodeURIComponent(path.slice(11)))
        : undefined);
    const format: ErrorFormat = route?.format ?? (path.startsWith('/v1/') ? 'openai' : 'ollama');
    if (!route) {
      sendError(res, format, 404, `no route for ${path}`, 'not_found');
      return;
    }
    if (req.method !== route.method && !(req.method === 'HEAD' && route.method === 'GET')) {
      res.setHeader('allow', route.method);
      sendError(res, format, 405, `method ${req.method} not allowed on ${path}`, 'method_not_allowed');
      return;
    }
    if (route.probe && probeFailRng() < (ctx.faults.failRate ?? 0)) {
      sendError(res, format, 500, 'injected failure (llmlb engine fault)', 'injected_failure');
      return;
    }
    Promise.resolve()
      .then(() => route.handle(req, res))
      .catch((err: unknown) => {
        if (err instanceof HttpError) sendError(res, format, err.status, err.message, err.code);
        else sendError(res, format, 500, `internal error: ${(err as Error).message}`, 'internal_error');
      });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  /** Stop listening and drop every connection (also the crash fault). Idempotent. */
  function shutdown(): Promise<void> {
    closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      ctx.driver.stop();
      for (const s of sockets) s.destroy();
    });
    return closing;
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : opts.port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    close: shutdown,
    setFaults: (f) => {
      ctx.faults = { ...f };
    },
    stats: (): EngineStats & { requests: number } => engineStats(ctx),
  };
}
