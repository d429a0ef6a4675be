/**
 * What a generation request asks the emulated engine for, read from its JSON body once. The prompt
 * text follows the router's rules (src/core/prompt.ts, src/proxy/routes.ts), so the router's prefix
 * index and the engine's prefix cache see the same prompt.
 */
import { HttpError, positiveInt, type Obj } from './http.js';
import { messagesPromptText } from '../api/anthropic.js';
import { responsesPromptText } from '../api/openai-responses.js';
import { flattenMessages, promptText } from './tokens.js';
import type { EndpointKind } from './wire.js';

export interface GenerationRequest {
  readonly model: string;
  /** The prompt as one text: chat messages flattened, Ollama `system` prepended. */
  readonly text: string;
  /** num_predict / max_completion_tokens / max_tokens, when a positive integer. */
  readonly cap: number | undefined;
  readonly stream: boolean;
  /** OpenAI stream_options.include_usage. */
  readonly includeUsage: boolean;
  /** Ollama answers a request without prompt/messages by (pretending to) load the model. */
  readonly loadOnly: boolean;
}

const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});

/** Throws HttpError 400 for what the real API refuses; the model's existence is checked by the caller. */
export function parseGeneration(kind: EndpointKind, body: Obj): GenerationRequest {
  if (typeof body.model !== 'string' || body.model === '') {
    throw new HttpError(400, 'model is required', 'missing_model');
  }
  const model = body.model;
  if (kind === 'ollama-generate' || kind === 'ollama-chat') {
    const chat = kind === 'ollama-chat';
    const input = chat ? body.messages : body.prompt;
    if (chat && input !== undefined && !Array.isArray(input)) {
      throw new HttpError(400, 'messages must be an array', 'invalid_messages');
    }
    const prompt = typeof body.prompt === 'string' ? body.prompt : '';
    const system = typeof body.system === 'string' && body.system !== '' ? body.system : undefined;
    return {
      model,
      text: chat
        ? flattenMessages(Array.isArray(input) ? input : [])
        : system !== undefined
          ? `${system}\n${prompt}`
          : prompt,
      cap: positiveInt(obj(body.options).num_predict),
      stream: body.stream !== false, // Ollama streams unless told not to
      includeUsage: false,
      loadOnly: input === undefined || (!chat && input === ''),
    };
  }
  if (kind === 'anthropic-messages') {
    if (!Array.isArray(body.messages))
      throw new HttpError(400, 'messages: Field required', 'missing_messages');
    const cap = positiveInt(body.max_tokens);
    if (cap === undefined) throw new HttpError(400, 'max_tokens: Field required', 'missing_max_tokens');
    return {
      model,
      text: messagesPromptText(body),
      cap,
      stream: body.stream === true,
      includeUsage: false,
      loadOnly: false,
    };
  }
  if (kind === 'openai-responses') {
    if (typeof body.input !== 'string' && !Array.isArray(body.input))
      throw new HttpError(400, 'input is required', 'missing_input');
    return {
      model,
      text: responsesPromptText(body),
      cap: positiveInt(body.max_output_tokens),
      stream: body.stream === true,
      includeUsage: false,
      loadOnly: false,
    };
  }
  let text: string;
  if (kind === 'openai-chat') {
    if (!Array.isArray(body.messages)) throw new HttpError(400, 'messages is required', 'missing_messages');
    text = flattenMessages(body.messages);
  } else text = promptText(body.prompt);
  return {
    model,
    text,
    cap: positiveInt(body.max_completion_tokens) ?? positiveInt(body.max_tokens),
    stream: body.stream === true,
    includeUsage: obj(body.stream_options).include_usage === true,
    loadOnly: false,
  };
}
