/**
 * Ollama API ⇄ OpenAI API, for an Ollama-API request routed to an `api: openai` backend (vLLM,
 * SGLang). Only this path re-serialises bodies; same-API traffic is forwarded byte for byte.
 *
 * /api/chat → /v1/chat/completions. /api/generate → /v1/chat/completions with the system and
 * prompt as messages (Ollama applies the model's chat template to generate prompts, and so does
 * a chat endpoint), or → /v1/completions when `raw: true` (no template, as Ollama does).
 */

import type { ApiKind } from '../core/types.js';
import { errorBody, streamErrorChunk, type ErrorFormat } from '../http/errors.js';
import {
  ChatSseToMessages,
  chatToMessage,
  messagesPromptText,
  messagesToChat,
  stopSequences,
  toolsText,
} from '../api/anthropic.js';
import type { TranslateKind } from '../api/endpoints.js';
import { ChatSseToResponses, chatToResponse, responsesToChat } from '../api/openai-responses.js';
import { chatCounts, mergeToolCallDeltas, type ToolCallDraft } from '../api/chat-wire.js';
import { SseDecoder, sseEventObject } from '../api/sse.js';
import { showBody } from './ollama-show.js';

export type OllamaKind = 'generate' | 'chat';

export type { TranslateKind };

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Ollama `options` keys with a direct OpenAI (or vLLM extra-parameter) equivalent. */
const OPTION_MAP: Readonly<Record<string, string>> = {
  num_predict: 'max_tokens',
  temperature: 'temperature',
  top_p: 'top_p',
  top_k: 'top_k',
  min_p: 'min_p',
  stop: 'stop',
  seed: 'seed',
  frequency_penalty: 'frequency_penalty',
  presence_penalty: 'presence_penalty',
  repeat_penalty: 'repetition_penalty',
};

function chatMessages(messages: unknown[]): Obj[] {
  return messages.filter(isObj).map((m) => {
    const out: Obj = { role: m.role, content: m.content ?? '' };
    if (Array.isArray(m.tool_calls)) {
      // Ollama gives arguments as an object and no id; OpenAI wants a JSON string and an id.
      out.tool_calls = m.tool_calls.filter(isObj).map((tc, i) => {
        const fn = isObj(tc.function) ? tc.function : {};
        return {
          id: typeof tc.id === 'string' ? tc.id : `call_${i}`,
          type: 'function',
          function: {
            name: fn.name,
            arguments: typeof fn.arguments === 'string' ? fn.arguments : JSON.stringify(fn.arguments ?? {}),
          },
        };
      });
    }
    if (typeof m.tool_name === 'string') out.name = m.tool_name;
    return out;
  });
}

export interface TranslatedRequest {
  readonly path: '/v1/chat/completions' | '/v1/completions';
  readonly body: string;
  /** Whether the OpenAI response carries chat `message`s (vs completions `text`). */
  readonly chat: boolean;
}

export function ollamaToOpenAI(kind: OllamaKind, body: Obj, stream: boolean): TranslatedRequest {
  const out: Obj = { model: body.model, stream };
  if (stream) out.stream_options = { include_usage: true };
  const options = isObj(body.options) ? body.options : {};
  for (const [k, v] of Object.entries(options)) {
    const mapped = Object.hasOwn(OPTION_MAP, k) ? OPTION_MAP[k] : undefined; // options.constructor is no option
    if (mapped !== undefined && v !== undefined && !(k === 'num_predict' && typeof v === 'number' && v < 0)) {
      out[mapped] = v;
    }
  }
  if (body.format === 'json') out.response_format = { type: 'json_object' };
  else if (isObj(body.format)) {
    out.response_format = { type: 'json_schema', json_schema: { name: 'response', schema: body.format } };
  }
  if (Array.isArray(body.tools)) out.tools = body.tools;

  let chat = true;
  let path: TranslatedRequest['path'] = '/v1/chat/completions';
  if (kind === 'chat') {
    out.messages = chatMessages(Array.isArray(body.messages) ? body.messages : []);
  } else if (body.raw === true) {
    chat = false;
    path = '/v1/completions';
    out.prompt = typeof body.prompt === 'string' ? body.prompt : '';
  } else {
    const messages: Obj[] = [];
    if (typeof body.system === 'string' && body.system !== '')
      messages.push({ role: 'system', content: body.system });
    messages.push({ role: 'user', content: typeof body.prompt === 'string' ? body.prompt : '' });
    out.messages = messages;
  }
  return { path, body: JSON.stringify(out), chat };
}

const finishToDone = (r: unknown): string => (r === 'length' ? 'length' : 'stop');

export interface Counts {
  promptTokens: number;
  completionTokens: number;
}

/** Ollama's closing fields; durations are what the router measured, in ns (no engine timings). */
function doneFields(doneReason: string, counts: Partial<Counts> | undefined, totalMs: number): Obj {
  return {
    done: true,
    done_reason: doneReason,
    total_duration: Math.round(totalMs * 1e6),
    load_duration: 0,
    prompt_eval_count: counts?.promptTokens ?? 0,
    eval_count: counts?.completionTokens ?? 0,
  };
}

function ollamaToolCalls(calls: unknown): Obj[] | undefined {
  if (!Array.isArray(calls) || calls.length === 0) return undefined;
  return calls.filter(isObj).map((tc) => {
    const fn = isObj(tc.function) ? tc.function : {};
    let args: unknown = fn.arguments;
    if (typeof args === 'string') {
      try {
        args = JSON.parse(args);
      } catch {
        // keep the string: a model's malformed arguments are the client's to see
      }
    }
    return { function: { name: fn.name, arguments: args ?? {} } };
  });
}

/** A whole OpenAI response → the Ollama response body. Returns undefined if it isn't one. */
export function openAIResponseToOllama(
  kind: OllamaKind,
  model: string,
  text: string,
  totalMs: number,
  now: Date,
): { body: string; counts: Counts | undefined } | undefined {
  let o: unknown;
  try {
    o = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObj(o) || !Array.isArray(o.choices)) return undefined;
  const choice = isObj(o.choices[0]) ? o.choices[0] : {};
  const msg = isObj(choice.message) ? choice.message : undefined;
  const content =
    typeof msg?.content === 'string' ? msg.content : typeof choice.text === 'string' ? choice.text : '';
  const counts = chatCounts(o.usage);
  const head: Obj = { model, created_at: now.toISOString() };
  if (kind === 'chat') {
    const message: Obj = { role: 'assistant', content };
    const calls = ollamaToolCalls(msg?.tool_calls);
    if (calls) message.tool_calls = calls;
    head.message = message;
  } else head.response = content;
  return {
    body: JSON.stringify({ ...head, ...doneFields(finishToDone(choice.finish_reason), counts, totalMs) }),
    counts,
  };
}

/**
 * OpenAI SSE → Ollama NDJSON, incrementally: `push` returns the lines to write for a chunk,
 * `end` the closing line with counts. Tool-call deltas are accumulated and sent whole, as
 * Ollama does.
 */
export class SseToNdjson {
  private readonly sse = new SseDecoder();
  private doneReason = 'stop';
  private toolCalls: ToolCallDraft[] = [];
  /** Events that carried text or a tool call: the token count when the backend sent no usage. */
  private contentEvents = 0;
  counts: Counts | undefined;
  error: string | undefined;

  constructor(
    private readonly kind: OllamaKind,
    private readonly model: string,
  ) {}

  push(chunk: Buffer): string {
    let out = '';
    for (const event of this.sse.push(chunk)) out += this.event(event);
    return out;
  }

  private event(event: string): string {
    const o = sseEventObject(event);
    if (!o) return '';
    if (isObj(o.error)) this.error = typeof o.error.message === 'string' ? o.error.message : 'upstream error';
    const counts = chatCounts(o.usage);
    if (counts) this.counts = counts;
    const choice = Array.isArray(o.choices) && isObj(o.choices[0]) ? o.choices[0] : undefined;
    if (!choice) return '';
    if (choice.finish_reason) this.doneReason = finishToDone(choice.finish_reason);
    const delta = isObj(choice.delta) ? choice.delta : undefined;
    if (delta && Array.isArray(delta.tool_calls)) {
      this.contentEvents++;
      mergeToolCallDeltas(this.toolCalls, delta.tool_calls);
    }
    const text =
      typeof delta?.content === 'string' ? delta.content : typeof choice.text === 'string' ? choice.text : '';
    if (text === '') return '';
    this.contentEvents++;
    return this.line(text) + '\n';
  }

  private line(text: string, extra?: Obj): string {
    const head: Obj = { model: this.model, created_at: new Date().toISOString() };
    if (this.kind === 'chat') head.message = { role: 'assistant', content: text, ...extra };
    else head.response = text;
    head.done = false;
    return JSON.stringify(head);
  }

  end(totalMs: number): string {
    let out = '';
    if (this.toolCalls.length > 0 && this.kind === 'chat') {
      const calls = ollamaToolCalls(
        this.toolCalls.map((t) => ({ function: { name: t.name, arguments: t.args } })),
      );
      out += this.line('', { tool_calls: calls }) + '\n';
    }
    const head: Obj = { model: this.model, created_at: new Date().toISOString() };
    if (this.kind === 'chat') head.message = { role: 'assistant', content: '' };
    else head.response = '';
    return out + JSON.stringify({ ...head, ...doneFields(this.doneReason, this.counted, totalMs) }) + '\n';
  }

  /** The usage the backend sent, else (it ignored include_usage, or cannot give it) its events counted. */
  get counted(): Partial<Counts> {
    return this.counts ?? { completionTokens: this.contentEvents };
  }
}

/** A streamed answer converted as it comes. */
export interface StreamConverter {
  /** What to write for an upstream chunk. */
  push(chunk: Buffer): string;
  /** What to write after the last chunk (the closing event, or the error the stream carried). */
  end(totalMs: number): string;
  readonly counts: Partial<Counts> | undefined;
}

/** One request re-addressed and re-serialised for its backend, and how its answer comes back. */
export interface Translation {
  readonly path: string;
  readonly method: 'GET' | 'POST';
  /** JSON; undefined for a GET. */
  readonly body: string | undefined;
  /** The client's API, the format errors are converted to. */
  readonly client: ErrorFormat;
  /** Content type of a converted answer, streamed or whole. */
  contentType(streamed: boolean): string;
  /** A whole answer's body for the client; undefined when it is not what was expected. */
  whole(text: string, totalMs: number): { body: string; counts: Counts | undefined } | undefined;
  /** A converter for a streamed answer; undefined when the request did not stream. */
  stream(): StreamConverter | undefined;
  /** An upstream error body (OpenAI format) in the client's format. */
  error(text: string, status: number): string;
  /**
   * The whole answer, given by the router itself: nothing is sent upstream (Anthropic
   * count_tokens on a backend without it: the router's estimate).
   */
  readonly local?: { readonly body: string; readonly headers: Readonly<Record<string, string>> };
}

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * Any error body as the client's: OpenAI bodies pass as they are, Ollama gets `{"error": "…"}`,
 * Anthropic `{"type": "error", "error": {…}}`.
 */
function convertError(client: ErrorFormat, text: string, status: number): string {
  if (client === 'openai') return text;
  try {
    const o = JSON.parse(text) as { error?: { message?: unknown } | string };
    const m =
      typeof o.error === 'string' ? o.error : typeof o.error?.message === 'string' ? o.error.message : text;
    return errorBody(client, status, m, '');
  } catch {
    return errorBody(client, status, text, '');
  }
}

class NdjsonStream implements StreamConverter {
  private readonly sse: SseToNdjson;
  constructor(kind: OllamaKind, model: string) {
    this.sse = new SseToNdjson(kind, model);
  }
  push(chunk: Buffer): string {
    return this.sse.push(chunk);
  }
  end(totalMs: number): string {
    return this.sse.error !== undefined ? streamErrorChunk('ollama', this.sse.error) : this.sse.end(totalMs);
  }
  get counts(): Partial<Counts> | undefined {
    return this.sse.counted;
  }
}

class ResponsesStream implements StreamConverter {
  private readonly conv: ChatSseToResponses;
  constructor(model: string) {
    this.conv = new ChatSseToResponses(model);
  }
  push(chunk: Buffer): string {
    return this.conv.push(chunk);
  }
  end(): string {
    return this.conv.end();
  }
  get counts(): Counts | undefined {
    return this.conv.counts;
  }
}

function translation(
  client: ErrorFormat,
  path: string,
  body: string | undefined,
  whole: Translation['whole'],
  stream?: () => StreamConverter,
  streamType = 'text/event-stream',
): Translation {
  return {
    path,
    method: body === undefined ? 'GET' : 'POST',
    body,
    client,
    contentType: (streamed) => (streamed ? streamType : JSON_TYPE),
    whole,
    stream: () => stream?.(),
    error: (text, status) => convertError(client, text, status),
  };
}

/** OpenAI embeddings `data` → vectors, in input order. */
function embeddingVectors(text: string): { vectors: unknown[]; counts: Counts | undefined } | undefined {
  let o: unknown;
  try {
    o = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObj(o) || !Array.isArray(o.data)) return undefined;
  const rows = o.data.filter(isObj);
  rows.sort((a, b) => (typeof a.index === 'number' && typeof b.index === 'number' ? a.index - b.index : 0));
  const u = isObj(o.usage) ? o.usage : {};
  const prompt = typeof u.prompt_tokens === 'number' ? u.prompt_tokens : 0;
  return { vectors: rows.map((r) => r.embedding), counts: { promptTokens: prompt, completionTokens: 0 } };
}

/** What a backend can do, as the fleet knows it. */
export interface BackendTraits {
  readonly api: ApiKind;
  /** Whether it answers /v1/responses itself (undefined: not known yet, so translate). */
  readonly responsesApi?: boolean | undefined;
  /** Whether it answers Anthropic's /v1/messages itself (undefined: not known yet, so translate). */
  readonly messagesApi?: boolean | undefined;
}

/**
 * The translation a request needs on this backend, or undefined to forward it as it came. The
 * request path calls this per attempt, and hands the result to UpstreamExchange (`translation`)
 * and to the pool dispatch (path, method, body).
 */
export function upstreamTranslation(
  kind: TranslateKind | undefined,
  backend: BackendTraits,
  body: Obj,
  stream: boolean,
): Translation | undefined {
  if (kind === undefined) return undefined;
  const model = typeof body.model === 'string' ? body.model : '';
  if (kind === 'responses') {
    if (backend.responsesApi === true) return undefined;
    return translation(
      'openai',
      '/v1/chat/completions',
      JSON.stringify(responsesToChat(body, stream)),
      (text) => chatToResponse(text, model),
      () => new ResponsesStream(model),
    );
  }
  if (kind === 'messages') {
    if (backend.messagesApi === true) return undefined;
    const stops = stopSequences(body);
    return translation(
      'anthropic',
      '/v1/chat/completions',
      JSON.stringify(messagesToChat(body, stream)),
      (text) => chatToMessage(text, model, stops),
      () => new ChatSseToMessages(model, stops),
    );
  }
  if (kind === 'count-tokens') {
    if (backend.messagesApi === true) return undefined;
    // The router's estimate (4 characters a token, as admission counts), said so in a header.
    const tokens = Math.ceil((messagesPromptText(body).length + toolsText(body).length) / 4);
    const answer = JSON.stringify({ input_tokens: tokens });
    return {
      ...translation('anthropic', '', undefined, () => ({ body: answer, counts: undefined })),
      local: { body: answer, headers: { 'x-llmlb-token-count': 'estimated (4 characters a token)' } },
    };
  }
  if (backend.api !== 'openai') return undefined;
  switch (kind) {
    case 'generate':
    case 'chat': {
      const tr = ollamaToOpenAI(kind, body, stream);
      return translation(
        'ollama',
        tr.path,
        tr.body,
        (text, totalMs) => openAIResponseToOllama(kind, model, text, totalMs, new Date()),
        () => new NdjsonStream(kind, model),
        'application/x-ndjson',
      );
    }
    case 'embed':
    case 'embeddings': {
      const input = kind === 'embed' ? body.input : body.prompt;
      const req: Obj = { model, input: input ?? '' };
      if (typeof body.dimensions === 'number') req.dimensions = body.dimensions;
      return translation('ollama', '/v1/embeddings', JSON.stringify(req), (text, totalMs) => {
        const e = embeddingVectors(text);
        if (!e) return undefined;
        const out =
          kind === 'embeddings'
            ? { embedding: e.vectors[0] ?? [] }
            : {
                model,
                embeddings: e.vectors,
                total_duration: Math.round(totalMs * 1e6),
                load_duration: 0,
                prompt_eval_count: e.counts?.promptTokens ?? 0,
              };
        return { body: JSON.stringify(out), counts: e.counts };
      });
    }
    case 'show':
      return translation('ollama', '/v1/models', undefined, (text) => {
        const b = showBody(model, text);
        return b === undefined ? undefined : { body: b, counts: undefined };
      });
  }
}
