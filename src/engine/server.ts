/**
 * The emulated inference server (`llmlb engine`): a real node:http server with Ollama and
 * OpenAI/vLLM endpoints, answering from one EngineModel driven in real time. Batching, queueing,
 * prefix-cache hits and timings therefore behave like the simulator's, and the router under test
 * sees the same wire formats, metrics and failures as with real engines.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { messagesPromptText, toolsText } from '../api/anthropic.js';
import { endpoint, ENDPOINTS } from '../api/endpoints.js';
import { createRng, deriveSeed } from '../core/rng.js';
import { RealTimeDriver } from './driver.js';
import { Exchange } from './exchange.js';
import { parseFaults, type EngineFaults } from './faults.js';
import { HttpError, readJson, send, sendError, sendJson, type Obj } from './http.js';
import { emptyCounts, prometheusText, type ModelCounts } from './metrics.js';
import { EngineModel } from './model.js';
import { parseGeneration } from './request.js';
import {
  contextBlockHashes,
  countTokens,
  drawOutputTokens,
  outputText,
  promptBlockHashes,
} from './tokens.js';
import type { EngineProfile, EngineStats } from './types.js';
import { createWire, ollamaLoadBody, type EndpointKind, type ErrorFormat } from './wire.js';

export { defaultProfile } from './profile.js';
export type { EngineFaults } from './faults.js';

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

/** The header only the engine reads: the output length a workload generator decided. */
export const OUTPUT_TOKENS_HEADER = 'x-llmlb-output-tokens';

interface Route {
  readonly method: 'GET' | 'POST';
  readonly format: ErrorFormat;
  /** A listing route that `failRate` also fails (generation routes apply their own faults). */
  readonly probe?: boolean;
  readonly handle: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;
}

/** Length of the emulated embedding vectors (unless a request asks for `dimensions`). */
const EMBEDDING_DIMS = 32;

/** A deterministic unit vector for a text: equal texts embed equally, different ones differently. */
function embed(text: string, dims: number): number[] {
  const v: number[] = [];
  for (let block = 0; v.length < dims; block++) {
    const h = createHash('sha256').update(`${block}\0${text}`).digest();
    for (let i = 0; i + 1 < h.length && v.length < dims; i += 2) v.push(h.readUInt16BE(i) / 32768 - 1);
  }
  const norm = Math.hypot(...v) || 1;
  return v.map((x) => x / norm);
}

/** A fixed-looking digest for a model name, so /api/tags and /api/ps look like Ollama's. */
const digestOf = (name: string): string => createHash('sha256').update(name).digest('hex');

export async function startEngine(opts: EngineServerOptions): Promise<EngineServer> {
  const host = opts.host ?? '127.0.0.1';
  const baseModels = opts.models && opts.models.length > 0 ? [...opts.models] : ['llama3'];
  // LoRA adapters are served as models of their own, on the first base model (as vLLM's --lora-modules).
  const adapters = (opts.profile.lora?.adapters ?? []).filter((a) => !baseModels.includes(a));
  const models = [...baseModels, ...adapters];
  const timeScale = opts.timeScale ?? 1;
  const seed = opts.seed ?? 1;
  const name = opts.name ?? 'engine';
  const meanOutput = opts.defaultOutputTokens?.mean ?? 128;
  const profile = opts.profile;
  const driver = new RealTimeDriver(new EngineModel(profile), timeScale);
  const outputRng = createRng(deriveSeed(seed, 'output-length'));
  const failRng = createRng(deriveSeed(seed, 'fail'));
  // Probes get their own stream, so their timing cannot shift which generation requests fail.
  const probeFailRng = createRng(deriveSeed(seed, 'fail-probe'));
  const startedAt = new Date().toISOString();
  let faults: EngineFaults = opts.faults ?? {};
  let requests = 0;
  let seqNo = 0;
  const sockets = new Set<Socket>();
  let closing: Promise<void> | undefined;

  /** Ollama names 'llama3' and 'llama3:latest' the same model: the name it is served as, if any. */
  const servedAs = (m: string): string | undefined =>
    models.includes(m)
      ? m
      : m.endsWith(':latest') && models.includes(m.slice(0, -7))
        ? m.slice(0, -7)
        : models.includes(`${m}:latest`)
          ? `${m}:latest`
          : undefined;
  /** Per-model counters for /metrics; and the model of each submitted sequence, until it ends. */
  const perModel = new Map<string, ModelCounts>(models.map((m) => [m, emptyCounts()]));
  const seqModel = new Map<string, ModelCounts>();
  /** perModel with running / waiting counted now, each sequence under its own model only. */
  const modelCounts = (): ReadonlyMap<string, ModelCounts> => {
    for (const c of perModel.values()) c.running = c.waiting = 0;
    driver.model.forEachLive((seq, running) => {
      const c = seqModel.get(seq);
      if (c) {
        if (running) c.running++;
        else c.waiting++;
      }
    });
    return perModel;
  };

  const stats = (): EngineStats & { requests: number } => ({ ...driver.model.stats(), requests });

  /** Generation endpoints: parse, apply faults, submit to the model, answer from its events. */
  async function generate(
    kind: EndpointKind,
    req: IncomingMessage,
    res: ServerResponse,
    body?: Obj,
  ): Promise<void> {
    const format: ErrorFormat = endpoint(kind).family;
    requests++;
    const f = faults;
    if (f.exitAfter !== undefined && requests > f.exitAfter) {
      // Simulated crash: the box is gone, sockets and all (shutdown only resolves).
      shutdown().catch(() => undefined);
      return;
    }
    if (failRng() < (f.failRate ?? 0)) {
      sendError(res, format, 500, 'injected failure (llmlb engine fault)', 'injected_failure');
      return;
    }
    if (f.saturateRate !== undefined && failRng() < f.saturateRate) {
      const extra: Record<string, string> =
        f.retryAfterS !== undefined ? { 'retry-after': String(f.retryAfterS) } : {};
      sendError(res, format, 429, 'busy (llmlb engine fault)', 'saturated', extra);
      return;
    }
    if (f.hang) return; // accept and never answer; the socket closes when the client gives up

    const id = `${name}-${++seqNo}`;
    // Client gone (or stream cut by a fault) before the end: free the slot. After a normal finish the
    // driver has already dropped the sequence, so the cancel is a no-op.
    let gone = false;
    res.on('close', () => {
      gone = true;
      seqModel.delete(id);
      driver.cancel(id);
    });
    const g = parseGeneration(kind, body ?? (await readJson(req)));
    const served = servedAs(g.model);
    if (served === undefined) {
      throw format === 'ollama'
        ? new HttpError(404, `model '${g.model}' not found`, 'model_not_found')
        : new HttpError(404, `The model \`${g.model}\` does not exist.`, 'model_not_found');
    }
    if (g.loadOnly) {
      sendJson(res, 200, ollamaLoadBody(g.model, kind === 'ollama-chat'));
      return;
    }

    const hint = Number(req.headers[OUTPUT_TOKENS_HEADER]);
    let outputTokens = Number.isInteger(hint) && hint >= 1 ? hint : drawOutputTokens(outputRng, meanOutput);
    let truncated = false;
    if (g.cap !== undefined && outputTokens > g.cap) {
      truncated = true;
      outputTokens = g.cap;
    }

    const answer = outputText(createRng(deriveSeed(seed, id)), outputTokens);
    const exchange = new Exchange({
      res,
      wire: createWire(kind, id, g.model, g.includeUsage),
      stream: g.stream,
      answer,
      timeScale,
      truncated,
      dieAfterChunks: g.stream ? f.dieMidStreamAfterChunks : undefined,
    });
    if (gone) return;
    const promptTokens = countTokens(g.text);
    const blockHashes = promptBlockHashes(g.text, profile.blockSize);
    const counts = perModel.get(served)!;
    seqModel.set(id, counts);
    driver.submit(
      {
        id,
        promptTokens,
        outputTokens,
        blockHashes,
        contextBlockHashes: contextBlockHashes(g.text, blockHashes, answer, profile.blockSize),
        model: served,
      },
      {
        progress: (total) => exchange.progress(total),
        finished: (ev) => {
          seqModel.delete(id);
          counts.completed++;
          counts.promptTokens += ev.promptTokens;
          counts.generatedTokens += ev.outputTokens;
          counts.prefixQueries += ev.promptTokens;
          counts.prefixHits += ev.cachedTokens;
          exchange.finished(ev);
        },
      },
    );
  }

  const ollama = opts.api === 'ollama' || opts.api === 'both';
  const contextLength = opts.contextLength ?? 8192;
  // As vLLM lists a model: `root` and `max_model_len` are what clients read the context length from.
  // An adapter as vLLM lists a LoRA module: `root` its path, `parent` the base model it runs on.
  const modelEntry = (id: string): Obj =>
    adapters.includes(id)
      ? {
          id,
          object: 'model',
          created: 0,
          owned_by: 'llmlb',
          root: `/adapters/${id}`,
          parent: baseModels[0],
          max_model_len: contextLength,
        }
      : { id, object: 'model', created: 0, owned_by: 'llmlb', root: id, max_model_len: contextLength };
  const routes = new Map<string, Route>();
  const post = (path: string, kind: EndpointKind): void => {
    routes.set(path, {
      method: 'POST',
      format: endpoint(kind).family,
      handle: (req, res) => generate(kind, req, res),
    });
  };
  const modelOr404 = (format: ErrorFormat, m: unknown): string => {
    if (typeof m !== 'string' || m === '') throw new HttpError(400, 'model is required', 'missing_model');
    if (servedAs(m) === undefined)
      throw format === 'ollama'
        ? new HttpError(404, `model '${m}' not found`, 'model_not_found')
        : new HttpError(404, `The model \`${m}\` does not exist.`, 'model_not_found');
    return m;
  };
  /** Embeddings: answered at once (no batch slot), as the vectors of the inputs. */
  const embeddings = (format: ErrorFormat, answer: (model: string, b: Obj) => object): Route => ({
    method: 'POST',
    format,
    handle: async (req, res) => {
      requests++;
      const b = await readJson(req);
      sendJson(res, 200, answer(modelOr404(format, b.model), b));
    },
  });
  const inputs = (v: unknown): string[] => {
    if (typeof v === 'string') return [v];
    if (Array.isArray(v)) return v.map((x) => (typeof x === 'string' ? x : JSON.stringify(x)));
    throw new HttpError(400, 'input must be a string or an array of strings', 'invalid_input');
  };
  const dims = (b: Obj): number =>
    typeof b.dimensions === 'number' && Number.isInteger(b.dimensions) && b.dimensions >= 1
      ? Math.min(b.dimensions, 4096)
      : EMBEDDING_DIMS;

  // Generation endpoints from the descriptors (src/api). Ollama serves the OpenAI-compatible
  // routes too, so every engine has them; the Ollama API only with `api: ollama | both`.
  for (const e of ENDPOINTS) {
    if (!e.engineGeneration || (e.family === 'ollama' && !ollama)) continue;
    const optional =
      e.name === 'openai-responses'
        ? opts.responses !== false
        : e.name === 'anthropic-messages'
          ? opts.messages === true
          : undefined;
    if (optional === undefined) post(e.path, e.name);
    else if (optional) {
      const kind = e.name;
      routes.set(e.path, {
        method: 'POST',
        format: e.family,
        handle: async (req, res) => {
          const b = await readJson(req);
          // A body without a model is refused before it counts as a request or draws a fault, so
          // the router's capability check (an empty body) leaves seeded runs as they were.
          modelOr404(e.family, b.model);
          return generate(kind, req, res, b);
        },
      });
    }
  }
  if (opts.messages === true)
    routes.set(endpoint('anthropic-count-tokens').path, {
      method: 'POST',
      format: 'anthropic',
      handle: async (req, res) => {
        const b = await readJson(req);
        modelOr404('anthropic', b.model);
        if (!Array.isArray(b.messages))
          throw new HttpError(400, 'messages: Field required', 'missing_messages');
        sendJson(res, 200, { input_tokens: countTokens(messagesPromptText(b) + toolsText(b)) });
      },
    });
  routes.set(
    endpoint('openai-embeddings').path,
    embeddings('openai', (model, b) => {
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
  );
  routes.set('/v1/models', {
    method: 'GET',
    format: 'openai',
    probe: true,
    handle: (_req, res) =>
      sendJson(res, 200, {
        object: 'list',
        data: models.map(modelEntry),
      }),
  });
  if (ollama) {
    const entry = (m: string): Obj => ({
      name: m,
      model: m,
      modified_at: startedAt,
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
    routes.set(
      endpoint('ollama-embed').path,
      embeddings('ollama', (model, b) => {
        const texts = inputs(b.input);
        return {
          model,
          embeddings: texts.map((t) => embed(t, dims(b))),
          total_duration: 1_000_000,
          load_duration: 0,
          prompt_eval_count: texts.reduce((n, t) => n + countTokens(t), 0),
        };
      }),
    );
    routes.set(
      endpoint('ollama-embeddings').path,
      embeddings('ollama', (_model, b) => ({
        embedding: embed(typeof b.prompt === 'string' ? b.prompt : '', EMBEDDING_DIMS),
      })),
    );
    routes.set(endpoint('ollama-show').path, {
      method: 'POST',
      format: 'ollama',
      handle: async (req, res) => {
        const b = await readJson(req);
        const m = modelOr404('ollama', b.model ?? b.name);
        sendJson(res, 200, {
          license: '',
          modelfile: `FROM ${m}\n`,
          parameters: 'stop "<|eot_id|>"',
          template: '{{ .Prompt }}',
          details: entry(m).details,
          model_info: {
            'general.architecture': 'llama',
            'general.parameter_count': 8_030_261_248,
            'llama.context_length': contextLength,
          },
          capabilities: ['completion'],
          modified_at: startedAt,
        });
      },
    });
    routes.set('/api/tags', {
      method: 'GET',
      format: 'ollama',
      probe: true,
      handle: (_q, res) => sendJson(res, 200, { models: models.map(entry) }),
    });
    routes.set('/api/version', {
      method: 'GET',
      format: 'ollama',
      probe: true,
      handle: (_q, res) => sendJson(res, 200, { version: '0.9.0' }),
    });
    routes.set('/api/ps', {
      method: 'GET',
      format: 'ollama',
      probe: true,
      handle: (_q, res) => {
        const s = driver.model.stats();
        sendJson(res, 200, {
          models: models.map((m) => ({
            ...entry(m),
            expires_at: '2999-01-01T00:00:00Z',
            size_vram: 4_661_224_676,
          })),
          // llmlb extension: the engine's batch state, for scrapers that know it.
          llmlb: { running: s.running, waiting: s.waiting, slots: profile.slots, kvUsage: s.kvUsage },
        });
      },
    });
    routes.set('/', {
      method: 'GET',
      format: 'ollama',
      probe: true,
      handle: (_q, res) => send(res, 200, 'Ollama is running', 'text/plain; charset=utf-8'),
    });
  }
  routes.set('/metrics', {
    method: 'GET',
    format: 'ollama',
    handle: (_q, res) =>
      send(
        res,
        200,
        prometheusText(models, modelCounts(), driver.model.kvUsage, driver.model.loraInfo()),
        'text/plain; version=0.0.4; charset=utf-8',
      ),
  });
  routes.set('/healthz', {
    method: 'GET',
    format: 'ollama',
    handle: (_q, res) => sendJson(res, 200, { status: 'ok' }),
  });
  routes.set('/_emulator/stats', {
    method: 'GET',
    format: 'ollama',
    handle: (_q, res) => sendJson(res, 200, { name, timeScale, faults, profile, ...stats() }),
  });
  routes.set('/_emulator/faults', {
    method: 'POST',
    format: 'ollama',
    handle: async (req, res) => {
      faults = parseFaults(await readJson(req));
      sendJson(res, 200, { faults });
    },
  });

  /** GET /v1/models/{id}: the model's entry, or OpenAI's 404. */
  const modelRoute = (id: string): Route => ({
    method: 'GET',
    format: 'openai',
    handle: (_q, res) => {
      modelOr404('openai', id);
      sendJson(res, 200, modelEntry(id));
    },
  });

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    const route =
      routes.get(path) ??
      (path.startsWith('/v1/models/') ? modelRoute(decodeURIComponent(path.slice(11))) : undefined);
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
    if (route.probe && probeFailRng() < (faults.failRate ?? 0)) {
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
      driver.stop();
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
      faults = { ...f };
    },
    stats,
  };
}
