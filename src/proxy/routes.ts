import { messagesPromptText } from '../api/anthropic.js';
import { ENDPOINTS, type BodyKind, type Endpoint, type TranslateKind } from '../api/endpoints.js';
import { responsesPromptText } from '../api/openai-responses.js';
import { flattenMessages, promptText } from '../core/prompt.js';
import type { ApiKind } from '../core/types.js';

/** A client endpoint the router schedules and forwards: its descriptor (src/api) as the router reads it. */
export interface ProxyRoute {
  readonly api: ApiKind;
  /** Path on the backend (the alias /ollama/generate goes to /api/generate). */
  readonly upstreamPath: string;
  /**
   * How the request is translated for a backend that speaks the other API or lacks the route
   * (upstreamTranslation in translate.ts); unset: forwarded as it came, to any backend.
   */
  readonly translate?: TranslateKind;
  readonly chat: boolean;
  /**
   * What the body holds besides an Ollama/OpenAI generation: embeddings input, a model lookup, a
   * Response, an Anthropic Message or its token count.
   */
  readonly body?: Exclude<BodyKind, 'prompt' | 'chat'>;
  /** The endpoint's whole descriptor. */
  readonly endpoint: Endpoint;
}

function proxyRoute(e: Endpoint): ProxyRoute {
  const generation = e.body === 'prompt' || e.body === 'chat';
  return {
    api: e.api,
    upstreamPath: e.path,
    ...(e.translate !== undefined ? { translate: e.translate } : {}),
    chat: e.body === 'chat',
    ...(generation ? {} : { body: e.body as NonNullable<ProxyRoute['body']> }),
    endpoint: e,
  };
}

/**
 * Every POST route the router schedules and forwards, model-aware: the model is read from the
 * body and only backends serving it are candidates. Built from the descriptors (src/api).
 */
export const PROXY_ROUTES: ReadonlyMap<string, ProxyRoute> = new Map(
  ENDPOINTS.flatMap((e): [string, ProxyRoute][] => {
    const r = proxyRoute(e);
    return [e.path, ...e.aliases].map((p) => [p, r]);
  }),
);

export interface ParsedRequest {
  readonly model: string;
  readonly stream: boolean;
  readonly promptText: string;
  readonly maxTokens: number | undefined;
  readonly user: string | undefined;
}

type Obj = Record<string, unknown>;

/** Default request header naming the task (server.taskHintHeader): the predictor's task hint. */
export const TASK_HINT_HEADER = 'x-llmlb-task';

/**
 * A task-hint header's value as the output-length predictor takes it: trimmed, at most 64
 * characters (a task name, not a payload; the predictor hashes all of it), else none.
 */
export function taskHintOf(v: string | string[] | undefined): string | undefined {
  if (typeof v !== 'string') return undefined;
  const t = v.trim();
  return t.length > 0 && t.length <= 64 ? t : undefined;
}

/** The request header naming its InferenceObjective (Gateway API Inference Extension). */
export const OBJECTIVE_HEADER = 'x-gateway-inference-objective';

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
  if (route.body !== undefined) return { body: o, parsed: parseOther(route.body, o) };
  if (typeof o.model !== 'string' || o.model === '')
    throw new BadRequest('model is required', 'missing_model');
  if (route.chat && o.messages !== undefined && !Array.isArray(o.messages)) {
    throw new BadRequest('messages must be an array', 'invalid_messages');
  }
  if (route.api === 'openai' && route.chat && !Array.isArray(o.messages)) {
    throw new BadRequest('messages is required', 'missing_messages');
  }
  // Ollama streams unless told not to; OpenAI only when asked.
  const stream = route.endpoint.streamByDefault ? o.stream !== false : o.stream === true;
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

/** Embedding inputs as one text: a string, or strings (token-id arrays count as no text). */
function inputText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v.join('\n');
  if (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'number' || Array.isArray(x)))
    return '';
  return undefined;
}

/** Embeddings, /api/show and Responses bodies: never a generation, streamed only for Responses. */
function parseOther(kind: NonNullable<ProxyRoute['body']>, o: Obj): ParsedRequest {
  // Ollama's /api/show takes the older `name` too.
  const model =
    typeof o.model === 'string' && o.model !== '' ? o.model : kind === 'show' ? o.name : undefined;
  if (typeof model !== 'string' || model === '') throw new BadRequest('model is required', 'missing_model');
  const user = typeof o.user === 'string' ? o.user : undefined;
  switch (kind) {
    case 'show':
      return { model, stream: false, promptText: '', maxTokens: undefined, user };
    case 'embed':
    case 'embeddings': {
      const text = inputText(kind === 'embed' ? o.input : o.prompt);
      if (text === undefined)
        throw new BadRequest(
          kind === 'embed' ? 'input must be a string or an array of strings' : 'prompt must be a string',
          'invalid_input',
        );
      return { model, stream: false, promptText: text, maxTokens: undefined, user };
    }
    case 'messages':
    case 'count-tokens': {
      checkMessages(o.messages);
      const count = kind === 'count-tokens';
      if (!count && positiveInt(o.max_tokens) === undefined)
        throw new BadRequest('max_tokens: a positive integer is required', 'invalid_max_tokens');
      if (o.system !== undefined && typeof o.system !== 'string' && !Array.isArray(o.system))
        throw new BadRequest('system: a string or an array of text blocks', 'invalid_system');
      const meta = o.metadata;
      const uid =
        typeof meta === 'object' && meta !== null && typeof (meta as Obj).user_id === 'string'
          ? ((meta as Obj).user_id as string)
          : undefined;
      return {
        model,
        stream: !count && o.stream === true,
        promptText: messagesPromptText(o),
        maxTokens: count ? undefined : positiveInt(o.max_tokens),
        user: uid,
      };
    }
    case 'responses': {
      if (typeof o.input !== 'string' && !Array.isArray(o.input))
        throw new BadRequest('input must be a string or an array of input items', 'invalid_input');
      if (o.previous_response_id !== undefined && o.previous_response_id !== null)
        // Nothing is stored between requests (another backend may answer the next one).
        throw new BadRequest(
          'previous_response_id is not supported: send the whole conversation',
          'unsupported',
        );
      return {
        model,
        stream: o.stream === true,
        promptText: responsesPromptText(o),
        maxTokens: positiveInt(o.max_output_tokens),
        user,
      };
    }
  }
}

/** Anthropic `messages`: an array of user/assistant turns, each a string or an array of blocks. */
function checkMessages(v: unknown): void {
  if (!Array.isArray(v))
    throw new BadRequest('messages: an array of messages is required', 'invalid_messages');
  for (let i = 0; i < v.length; i++) {
    const m: unknown = v[i];
    const ok =
      typeof m === 'object' &&
      m !== null &&
      ((m as Obj).role === 'user' || (m as Obj).role === 'assistant') &&
      (typeof (m as Obj).content === 'string' || Array.isArray((m as Obj).content));
    if (!ok)
      throw new BadRequest(
        `messages.${i}: a message needs role 'user' or 'assistant' and content (a string or an array of blocks)`,
        'invalid_messages',
      );
  }
}
