/**
 * An emulated "Models Backend" (as the quota-aware router describes it): one HTTP server in front of 10 models, with a `single`
 * endpoint (OpenAI chat completions, so the llmlb router can front it) and a `batch` endpoint that
 * answers only when every prompt in it is done. Latency per (model, prompt) comes from the
 * scenario, divided by `timeScale`. Every call is recorded (model time) for the violation meter.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { CallRecord } from './meter.js';
import { latencyS, outputTokens, promptTokens, type BacklogModel } from './scenario.js';

export interface ModelsBackendOptions {
  readonly models: readonly BacklogModel[];
  /** Model seconds per real second (10 → a 2-minute prompt takes 12 s). */
  readonly timeScale: number;
  readonly port?: number;
  readonly host?: string;
  /** Prompts containing this text are answered 500 (retry and dead-letter tests). */
  readonly failMarker?: string;
}

export interface ModelsBackend {
  readonly url: string;
  /** Calls so far, times in model milliseconds since the backend started. */
  calls(): CallRecord[];
  /** Calls received per prompt (a prompt solved twice shows up here). */
  callsPerPrompt(): Map<string, number>;
  inFlight(): number;
  close(): Promise<void>;
}

type Obj = Record<string, unknown>;

function readBody(req: IncomingMessage): Promise<Obj> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', reject);
    req.on('end', () => {
      try {
        const v: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        if (typeof v !== 'object' || v === null || Array.isArray(v))
          reject(new Error('body must be a JSON object'));
        else resolve(v as Obj);
      } catch (err) {
        reject(err as Error);
      }
    });
  });
}

const json = (res: ServerResponse, status: number, v: unknown): void => {
  const body = JSON.stringify(v);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

export async function startModelsBackend(o: ModelsBackendOptions): Promise<ModelsBackend> {
  const k = o.timeScale;
  if (!(k > 0) || !Number.isFinite(k)) throw new Error('timeScale must be a positive number');
  const byName = new Map(o.models.map((m) => [m.name, m]));
  const t0 = performance.now();
  const modelNow = (): number => (performance.now() - t0) * k;
  const calls: CallRecord[] = [];
  const perPrompt = new Map<string, number>();
  let inFlight = 0;
  const sockets = new Set<Socket>();

  /** Runs one prompt on one model; resolves with the answer (the model keeps working if the client left). */
  async function solve(
    model: BacklogModel,
    prompt: string,
  ): Promise<{ answer: string; tokens: number; fail: boolean }> {
    const start = modelNow();
    const lat = latencyS(model, prompt);
    const tokens = promptTokens(prompt) + outputTokens(prompt);
    perPrompt.set(prompt, (perPrompt.get(prompt) ?? 0) + 1);
    inFlight++;
    await new Promise((r) => setTimeout(r, (lat * 1000) / k));
    inFlight--;
    calls.push({ model: model.name, startMs: start, endMs: start + lat * 1000, tokens });
    const fail = o.failMarker !== undefined && prompt.includes(o.failMarker);
    return { answer: `answer(${model.name}): ${prompt.slice(0, 24)}`, tokens, fail };
  }

  const server = createServer((req, res) => {
    (async () => {
      try {
        if (req.method === 'GET' && req.url === '/v1/models') {
          json(res, 200, {
            object: 'list',
            data: o.models.map((m) => ({ id: m.name, object: 'model', owned_by: 'backend' })),
          });
        } else if (req.method === 'GET' && req.url === '/_backend/calls') {
          // For a bench running the backend in another process: the call log and how often each prompt ran.
          json(res, 200, { calls, maxCallsPerPrompt: Math.max(0, ...perPrompt.values()), inFlight });
        } else if (req.method === 'GET' && (req.url === '/health' || req.url === '/healthz')) {
          json(res, 200, { ok: true });
        } else if (req.method === 'POST' && req.url === '/v1/chat/completions') {
          const b = await readBody(req);
          const model = byName.get(String(b.model));
          if (!model)
            return json(res, 404, {
              error: {
                message: `unknown model ${String(b.model)}`,
                type: 'invalid_request_error',
                code: 'model_not_found',
              },
            });
          const msgs = Array.isArray(b.messages) ? (b.messages as { content?: unknown }[]) : [];
          const prompt = String(msgs[msgs.length - 1]?.content ?? '');
          const r = await solve(model, prompt);
          if (r.fail)
            return json(res, 500, {
              error: { message: 'model failed', type: 'server_error', code: 'failed' },
            });
          json(res, 200, {
            id: `cmpl-${calls.length}`,
            object: 'chat.completion',
            model: model.name,
            choices: [{ index: 0, message: { role: 'assistant', content: r.answer }, finish_reason: 'stop' }],
            usage: {
              prompt_tokens: promptTokens(prompt),
              completion_tokens: r.tokens - promptTokens(prompt),
              total_tokens: r.tokens,
            },
          });
        } else if (req.method === 'POST' && req.url === '/batch') {
          // The as-is batch endpoint: prompts spread over the models in turn, one reply when all are done.
          const b = await readBody(req);
          const items = Array.isArray(b.prompts) ? (b.prompts as unknown[]).map(String) : [];
          const out = await Promise.all(items.map((p, i) => solve(o.models[i % o.models.length]!, p)));
          json(res, 200, {
            answers: out.map((r, i) => ({
              model: o.models[i % o.models.length]!.name,
              answer: r.answer,
              ok: !r.fail,
            })),
          });
        } else
          json(res, 404, {
            error: { message: 'not found', type: 'invalid_request_error', code: 'not_found' },
          });
      } catch (err) {
        if (!res.headersSent)
          json(res, 400, {
            error: { message: (err as Error).message, type: 'invalid_request_error', code: 'bad_request' },
          });
      }
    })().catch((err: unknown) => res.destroy(err instanceof Error ? err : new Error(String(err))));
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(o.port ?? 0, o.host ?? '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${o.host ?? '127.0.0.1'}:${port}`,
    calls: () => [...calls],
    callsPerPrompt: () => new Map(perPrompt),
    inFlight: () => inFlight,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
