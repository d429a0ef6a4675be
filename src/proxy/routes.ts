import { flattenMessages, promptText } from '../core/prompt.js';
import type { ApiKind } from '../core/types.js';
import type { OllamaKind } from './translate.js';

/** A client endpoint the router schedules and forwards. */
export interface ProxyRoute {
  readonly api: ApiKind;
  /** Path on the backend (the alias /ollama/generate goes to /api/generate). */
  readonly upstreamPath: string;
  /** Set for Ollama generation endpoints: how to translate for an OpenAI backend. */
  readonly ollamaKind?: OllamaKind;
  readonly chat: boolean;
}

export const PROXY_ROUTES: ReadonlyMap<string, ProxyRoute> = new Map([
  ['/api/generate', { api: 'ollama', upstreamPath: '/api/generate', ollamaKind: 'generate', chat: false }],
  ['/ollama/generate', { api: 'ollama', upstreamPath: '/api/generate', ollamaKind: 'generate', chat: false }],
  ['/api/chat', { api: 'ollama', upstreamPath: '/api/chat', ollamaKind: 'chat', chat: true }],
  ['/v1/completions', { api: 'openai', upstreamPath: '/v1/completions', chat: false }],
  ['/v1/chat/completions', { api: 'openai', upstreamPath: '/v1/chat/completions', chat: true }],
] as const);

export interface ParsedRequest {
  readonly model: string;
  readonly stream: boolean;
  readonly promptText: string;
  readonly maxTokens: number | undefined;
  readonly user: string | undefined;
}

type Obj = Record<string, unknown>;

/** Thrown for a body the API would refuse; the message is shown to the client. */
export class BadRequest extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

const positiveInt = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : undefined;

/**
 * What the router needs from a body: model, stream flag, prompt text, token cap. The body itself
 * is forwarded untouched, so this reads and never rewrites.
 */
export function parseBody(route: ProxyRoute, raw: Buffer): { body: Obj; parsed: ParsedRequest } {
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new BadRequest(`invalid JSON body: ${(err as Error).message}`, 'invalid_json');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new BadRequest('request body must be a JSON object', 'invalid_body');
  }
  const o = body as Obj;
  if (typeof o.model !== 'string' || o.model === '')
    throw new BadRequest('model is required', 'missing_model');
  if (route.chat && o.messages !== undefined && !Array.isArray(o.messages)) {
    throw new BadRequest('messages must be an array', 'invalid_messages');
  }
  if (route.api === 'openai' && route.chat && !Array.isArray(o.messages)) {
    throw new BadRequest('messages is required', 'missing_messages');
  }
  // Ollama streams unless told not to; OpenAI only when asked.
  const stream = route.api === 'ollama' ? o.stream !== false : o.stream === true;
  let text: string;
  if (route.chat) text = flattenMessages(Array.isArray(o.messages) ? o.messages : []);
  else if (route.api === 'ollama') {
    const p = typeof o.prompt === 'string' ? o.prompt : '';
    text = typeof o.system === 'string' && o.system !== '' ? `${o.system}\n${p}` : p;
  } else text = promptText(o.prompt);
  const options = o.options && typeof o.options === 'object' ? (o.options as Obj) : undefined;
  const maxTokens =
    route.api === 'ollama'
      ? positiveInt(options?.num_predict)
      : positiveInt(o.max_tokens ?? o.max_completion_tokens);
  return {
    body: o,
    parsed: {
      model: o.model,
      stream,
      promptText: text,
      maxTokens,
      user: typeof o.user === 'string' ? o.user : undefined,
    },
  };
}
