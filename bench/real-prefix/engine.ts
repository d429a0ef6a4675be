/**
 * One llama.cpp engine of the real-prefix bench, alone in its process: node-llama-cpp over a GGUF
 * file, one context with SLOTS sequences (each its own KV cache), served over the OpenAI API that
 * llmlb fronts. Like llama.cpp's server: a request takes the free slot sharing the longest prompt
 * prefix with it (slots.ts), evaluates only the rest, and waits FIFO while every slot is busy;
 * the context batches the slots' prefill and decode steps together.
 *
 * Routes: GET /v1/models; POST /v1/completions and /v1/chat/completions (streamed or not; a stream
 * ends with a usage chunk when `stream_options.include_usage`); GET /metrics in vLLM's names
 * (running, waiting, KV usage, prefix-cache queries/hits in tokens) for llmlb's scraper;
 * GET /_engine/stats and POST /_engine/reset (empties every slot) for the bench.
 * Output is exactly max_tokens tokens (EOS is sampled past, like vLLM's ignore_eos), so runs are
 * comparable. Usage: node --import tsx bench/real-prefix/engine.ts MODEL.gguf [--slots N]
 * [--ctx TOKENS] [--threads N] [--name MODEL_NAME]; sends {type:'ready', urls} over IPC.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { getLlama, LlamaLogLevel, type LlamaContextSequence, type Token } from 'node-llama-cpp';
import { exitWithParent, sendReady } from '../common.js';
import { pickSlot, reusableTokens } from './slots.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    slots: { type: 'string', default: '2' },
    ctx: { type: 'string', default: '4096' },
    threads: { type: 'string', default: '1' },
    name: { type: 'string', default: 'm' },
    // The /metrics page: vLLM's names with its prefix-cache counters, or llama-server --metrics' own.
    metrics: { type: 'string', default: 'vllm' },
  },
});
const modelPath = positionals[0];
const SLOTS = Number(values.slots);
const CTX = Number(values.ctx);
const THREADS = Number(values.threads);
const MODEL_NAME = values.name;
if (
  modelPath === undefined ||
  !(Number.isInteger(SLOTS) && SLOTS >= 1) ||
  !(Number.isInteger(CTX) && CTX >= 64) ||
  !(Number.isInteger(THREADS) && THREADS >= 1) ||
  (values.metrics !== 'vllm' && values.metrics !== 'llamacpp')
) {
  console.error(
    'usage: engine.ts MODEL.gguf [--slots N≥1] [--ctx TOKENS≥64] [--threads N≥1] [--name MODEL_NAME] [--metrics vllm|llamacpp]',
  );
  process.exit(2);
}

interface Slot {
  readonly seq: LlamaContextSequence;
  busy: boolean;
  lastUsed: number;
}

interface Job {
  readonly prompt: Token[];
  readonly start: (slot: Slot) => void;
}

/** The bench's counters (reset with the slots). */
const stats = { requests: 0, promptTokens: 0, reusedTokens: 0, completionTokens: 0 };

class BadRequest extends Error {}

type Obj = Record<string, unknown>;

function positiveIntOr(v: unknown, fallback: number): number {
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw new BadRequest('max_tokens must be ≥ 1');
  return v;
}

/** Chat messages as one prompt, as llmlb flattens them (src/core/prompt.ts): contents joined by '\n'. */
function chatPrompt(messages: unknown): string {
  if (!Array.isArray(messages)) throw new BadRequest('messages is required');
  return messages
    .map((m) => {
      const c = m && typeof m === 'object' ? (m as { content?: unknown }).content : undefined;
      return typeof c === 'string' ? c : '';
    })
    .join('\n');
}

async function readJson(req: IncomingMessage): Promise<Obj> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new BadRequest('invalid JSON body');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new BadRequest('body must be a JSON object');
  return body as Obj;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const b = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(b) });
  res.end(b);
}

async function main(): Promise<void> {
  const llama = await getLlama({
    gpu: false,
    build: 'never',
    progressLogs: false,
    logLevel: LlamaLogLevel.warn,
  });
  const model = await llama.loadModel({ modelPath: modelPath!, gpuLayers: 0 });
  const context = await model.createContext({ contextSize: CTX, sequences: SLOTS, threads: THREADS });
  const slots: Slot[] = Array.from({ length: SLOTS }, () => ({
    seq: context.getSequence(),
    busy: false,
    lastUsed: 0,
  }));
  const queue: Job[] = [];
  let clock = 0;

  /** Hands free slots to waiting jobs, oldest job first. */
  const dispatch = (): void => {
    while (queue.length > 0) {
      const i = pickSlot(
        slots.map((s) => ({ busy: s.busy, tokens: s.seq.contextTokens, lastUsed: s.lastUsed })),
        queue[0]!.prompt,
      );
      if (i < 0) return;
      const job = queue.shift()!;
      const slot = slots[i]!;
      slot.busy = true;
      job.start(slot);
    }
  };
  const acquire = (prompt: Token[]): Promise<Slot> =>
    new Promise((resolve) => {
      queue.push({ prompt, start: resolve });
      dispatch();
    });
  const release = (slot: Slot): void => {
    slot.busy = false;
    slot.lastUsed = ++clock;
    dispatch();
  };

  /**
   * Runs one request in a slot: keeps the cached prefix, erases the rest, evaluates the remainder
   * and samples `maxTokens` tokens, each handed to `onToken` (false from it stops early: the client
   * went away).
   */
  async function generate(
    prompt: Token[],
    maxTokens: number,
    temperature: number,
    onToken: (text: string) => boolean,
  ): Promise<{ cached: number; completion: number }> {
    const slot = await acquire(prompt);
    try {
      const seq = slot.seq;
      const cached = reusableTokens(seq.contextTokens, prompt);
      if (seq.nextTokenIndex > cached)
        await seq.eraseContextTokenRanges([{ start: cached, end: seq.nextTokenIndex }]);
      stats.requests++;
      stats.promptTokens += prompt.length;
      stats.reusedTokens += cached;
      let completion = 0;
      for await (const t of seq.evaluate(prompt.slice(cached), { temperature, yieldEogToken: true })) {
        completion++;
        stats.completionTokens++;
        if (!onToken(model.detokenize([t])) || completion >= maxTokens) break;
      }
      return { cached, completion };
    } finally {
      release(slot);
    }
  }

  async function complete(req: IncomingMessage, res: ServerResponse, chat: boolean): Promise<void> {
    const body = await readJson(req);
    const text = chat ? chatPrompt(body.messages) : body.prompt;
    if (typeof text !== 'string') throw new BadRequest('prompt must be a string');
    const maxTokens = positiveIntOr(body.max_tokens ?? body.max_completion_tokens, 16);
    const temperature = typeof body.temperature === 'number' ? body.temperature : 0;
    const prompt = [...(model.tokens.bos === null ? [] : [model.tokens.bos]), ...model.tokenize(text)];
    if (prompt.length + maxTokens > context.contextSize)
      throw new BadRequest(
        `prompt (${prompt.length} tokens) + max_tokens (${maxTokens}) exceeds the context of ${context.contextSize}`,
      );
    const id = `cmpl-${Math.random().toString(36).slice(2)}`;
    const created = Math.floor(Date.now() / 1000);
    const object = chat ? 'chat.completion.chunk' : 'text_completion';
    const choice = (t: string, finish: string | null): Obj =>
      chat
        ? { index: 0, delta: t === '' ? {} : { content: t }, finish_reason: finish }
        : { index: 0, text: t, logprobs: null, finish_reason: finish };
    const usageOf = (r: { cached: number; completion: number }): Obj => ({
      prompt_tokens: prompt.length,
      completion_tokens: r.completion,
      total_tokens: prompt.length + r.completion,
      prompt_tokens_details: { cached_tokens: r.cached },
    });

    if (body.stream === true) {
      const so = body.stream_options;
      const includeUsage = so !== null && typeof so === 'object' && (so as Obj).include_usage === true;
      let open = true;
      res.on('close', () => (open = false));
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const event = (o: unknown): void => void res.write(`data: ${JSON.stringify(o)}\n\n`);
      const r = await generate(prompt, maxTokens, temperature, (t) => {
        if (open) event({ id, object, created, model: MODEL_NAME, choices: [choice(t, null)] });
        return open;
      });
      if (!open) return;
      event({ id, object, created, model: MODEL_NAME, choices: [choice('', 'length')] });
      if (includeUsage) event({ id, object, created, model: MODEL_NAME, choices: [], usage: usageOf(r) });
      res.end('data: [DONE]\n\n');
      return;
    }
    let out = '';
    const r = await generate(prompt, maxTokens, temperature, (t) => {
      out += t;
      return true;
    });
    sendJson(res, 200, {
      id,
      object: chat ? 'chat.completion' : 'text_completion',
      created,
      model: MODEL_NAME,
      choices: [
        chat
          ? { index: 0, message: { role: 'assistant', content: out }, finish_reason: 'length' }
          : { index: 0, text: out, logprobs: null, finish_reason: 'length' },
      ],
      usage: usageOf(r),
    });
  }

  const metricsPage = (): string => {
    const running = slots.filter((s) => s.busy).length;
    let cachedTokens = 0;
    for (const s of slots) cachedTokens += s.seq.nextTokenIndex;
    if (values.metrics === 'llamacpp')
      // As llama-server --metrics says it: no model label, no prefix-cache counters.
      return [
        '# TYPE llamacpp:prompt_tokens_total counter',
        `llamacpp:prompt_tokens_total ${stats.promptTokens}`,
        '# TYPE llamacpp:tokens_predicted_total counter',
        `llamacpp:tokens_predicted_total ${stats.completionTokens}`,
        '# TYPE llamacpp:kv_cache_usage_ratio gauge',
        `llamacpp:kv_cache_usage_ratio ${cachedTokens / (SLOTS * context.contextSize)}`,
        '# TYPE llamacpp:requests_processing gauge',
        `llamacpp:requests_processing ${running}`,
        '# TYPE llamacpp:requests_deferred gauge',
        `llamacpp:requests_deferred ${queue.length}`,
        '',
      ].join('\n');
    const label = `{model_name="${MODEL_NAME}"}`;
    return [
      '# TYPE vllm:num_requests_running gauge',
      `vllm:num_requests_running${label} ${running}`,
      '# TYPE vllm:num_requests_waiting gauge',
      `vllm:num_requests_waiting${label} ${queue.length}`,
      '# TYPE vllm:kv_cache_usage_perc gauge',
      `vllm:kv_cache_usage_perc${label} ${cachedTokens / (SLOTS * context.contextSize)}`,
      '# TYPE vllm:prefix_cache_queries_total counter',
      `vllm:prefix_cache_queries_total${label} ${stats.promptTokens}`,
      '# TYPE vllm:prefix_cache_hits_total counter',
      `vllm:prefix_cache_hits_total${label} ${stats.reusedTokens}`,
      '',
    ].join('\n');
  };

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const route = `${req.method} ${path}`;
    const done = (p: Promise<void>): void => {
      p.catch((err: unknown) => {
        if (res.headersSent) res.destroy();
        else if (err instanceof BadRequest)
          sendJson(res, 400, { error: { message: err.message, type: 'invalid_request_error' } });
        else sendJson(res, 500, { error: { message: String(err), type: 'server_error' } });
      });
    };
    switch (route) {
      case 'GET /v1/models':
        return sendJson(res, 200, {
          object: 'list',
          data: [{ id: MODEL_NAME, object: 'model', created: 0, owned_by: 'llmlb-bench' }],
        });
      case 'POST /v1/completions':
        return done(complete(req, res, false));
      case 'POST /v1/chat/completions':
        return done(complete(req, res, true));
      case 'GET /metrics':
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
        return void res.end(metricsPage());
      case 'GET /props':
        // As llama.cpp's server says it: the slots and each one's context (the router sizes its
        // prefix credit from them: one kept prompt per slot).
        return sendJson(res, 200, {
          total_slots: SLOTS,
          default_generation_settings: { n_ctx: context.contextSize },
        });
      case 'GET /_engine/stats':
        return sendJson(res, 200, { ...stats, slots: SLOTS, contextSize: context.contextSize });
      case 'POST /_engine/reset':
        return done(
          (async () => {
            if (queue.length > 0 || slots.some((s) => s.busy)) throw new BadRequest('engine is busy');
            for (const s of slots) await s.seq.clearHistory();
            stats.requests = stats.promptTokens = stats.reusedTokens = stats.completionTokens = 0;
            sendJson(res, 200, { ok: true });
          })(),
        );
      default:
        return sendJson(res, 404, { error: { message: `no route ${route}`, type: 'not_found' } });
    }
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  exitWithParent(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await context.dispose();
    await model.dispose();
    await llama.dispose();
  });
  sendReady([`http://127.0.0.1:${(server.address() as AddressInfo).port}`]);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
