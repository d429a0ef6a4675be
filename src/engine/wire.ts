/**
 * Response shapes of the emulated engine, byte-compatible in the fields clients read with Ollama
 * (NDJSON) and OpenAI/vLLM (SSE). One Wire per request: it remembers the ids and timestamps the
 * chunks of one response share.
 */

import type { GenerationEndpoint } from '../api/endpoints.js';
import { MessageEvents, messageObject, type MessageShape } from '../api/anthropic.js';
import { ResponseEvents, responseObject, type ResponseShape } from '../api/openai-responses.js';

/** The endpoints the engine answers with a generation (src/api descriptors). */
export type EndpointKind = GenerationEndpoint;
export type ErrorFormat = 'ollama' | 'openai' | 'anthropic';

/** How a generation ended, with times in REAL seconds (model time / timeScale). */
export interface Completion {
  readonly promptTokens: number;
  readonly outputTokens: number;
  /** Prompt tokens found in the prefix cache (usage.prompt_tokens_details.cached_tokens, as vLLM). */
  readonly cachedTokens?: number | undefined;
  /** Stopped by num_predict / max_tokens rather than by the model. */
  readonly truncated: boolean;
  readonly queuedS: number;
  readonly prefillS: number;
  readonly decodeS: number;
}

export interface Wire {
  /** Content type of a streamed response. */
  readonly streamContentType: string;
  /** One streamed chunk carrying `text`. */
  chunk(text: string): string;
  /** Everything a stream sends after its last text chunk. */
  end(c: Completion): string;
  /** The whole non-streamed response body. */
  body(text: string, c: Completion): object;
}

const ns = (s: number): number => Math.max(0, Math.round(s * 1e9));

class OllamaWire implements Wire {
  readonly streamContentType = 'application/x-ndjson';
  constructor(
    private readonly model: string,
    private readonly chat: boolean,
  ) {}

  private content(text: string): object {
    return this.chat ? { message: { role: 'assistant', content: text } } : { response: text };
  }

  chunk(text: string): string {
    return `${JSON.stringify({ model: this.model, created_at: new Date().toISOString(), ...this.content(text), done: false })}\n`;
  }

  end(c: Completion): string {
    return `${JSON.stringify(this.body('', c))}\n`;
  }

  /**
   * Durations in ns. Time queued in the engine counts in total_duration only (Ollama has no field
   * for it); the first token comes out of prefill, so eval_duration covers tokens 2..n.
   */
  body(text: string, c: Completion): object {
    return {
      model: this.model,
      created_at: new Date().toISOString(),
      ...this.content(text),
      done: true,
      done_reason: c.truncated ? 'length' : 'stop',
      total_duration: ns(c.queuedS + c.prefillS + c.decodeS),
      load_duration: 0,
      prompt_eval_count: c.promptTokens,
      prompt_eval_duration: ns(c.prefillS),
      eval_count: c.outputTokens,
      eval_duration: ns(c.decodeS),
    };
  }
}

class OpenAIWire implements Wire {
  readonly streamContentType = 'text/event-stream';
  private readonly created = Math.floor(Date.now() / 1000);
  private first = true;
  constructor(
    private readonly id: string,
    private readonly model: string,
    private readonly chat: boolean,
    private readonly includeUsage: boolean,
  ) {}

  private event(choices: object[], extra?: object): string {
    const object = this.chat ? 'chat.completion.chunk' : 'text_completion';
    const payload = { id: this.id, object, created: this.created, model: this.model, choices, ...extra };
    return `data: ${JSON.stringify(payload)}\n\n`;
  }

  private choice(text: string, finishReason: string | null): object {
    if (!this.chat) return { index: 0, text, logprobs: null, finish_reason: finishReason };
    // The first delta names the role, as OpenAI and vLLM do.
    const delta =
      finishReason !== null ? {} : this.first ? { role: 'assistant', content: text } : { content: text };
    this.first = false;
    return { index: 0, delta, logprobs: null, finish_reason: finishReason };
  }

  chunk(text: string): string {
    return this.event([this.choice(text, null)]);
  }

  end(c: Completion): string {
    let out = this.event([this.choice('', c.truncated ? 'length' : 'stop')]);
    if (this.includeUsage) out += this.event([], { usage: usage(c) });
    return `${out}data: [DONE]\n\n`;
  }

  body(text: string, c: Completion): object {
    const finish_reason = c.truncated ? 'length' : 'stop';
    const choice = this.chat
      ? { index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason }
      : { index: 0, text, logprobs: null, finish_reason };
    return {
      id: this.id,
      object: this.chat ? 'chat.completion' : 'text_completion',
      created: this.created,
      model: this.model,
      choices: [choice],
      usage: usage(c),
    };
  }
}

function usage(c: Completion): object {
  return {
    prompt_tokens: c.promptTokens,
    completion_tokens: c.outputTokens,
    total_tokens: c.promptTokens + c.outputTokens,
    ...(c.cachedTokens !== undefined ? { prompt_tokens_details: { cached_tokens: c.cachedTokens } } : {}),
  };
}

/** OpenAI Responses API: one Response object, or its SSE events (the router's builders). */
class ResponsesWire implements Wire {
  readonly streamContentType = 'text/event-stream';
  private readonly shape: ResponseShape;
  private readonly events: ResponseEvents;
  constructor(id: string, model: string) {
    this.shape = { id: `resp_${id}`, model, createdAt: Math.floor(Date.now() / 1000) };
    this.events = new ResponseEvents(this.shape);
  }

  chunk(text: string): string {
    return this.events.delta(text);
  }

  end(c: Completion): string {
    return this.events.end(
      [],
      { promptTokens: c.promptTokens, completionTokens: c.outputTokens },
      c.truncated,
    );
  }

  body(text: string, c: Completion): object {
    return responseObject(this.shape, {
      text,
      toolCalls: [],
      counts: { promptTokens: c.promptTokens, completionTokens: c.outputTokens },
      truncated: c.truncated,
    });
  }
}

/** Anthropic Messages: one Message object, or its named SSE events (the router's builders). */
class MessagesWire implements Wire {
  readonly streamContentType = 'text/event-stream';
  private readonly shape: MessageShape;
  private readonly events: MessageEvents;
  constructor(id: string, model: string) {
    this.shape = { id: `msg_${id}`, model };
    this.events = new MessageEvents(this.shape);
  }

  chunk(text: string): string {
    return this.events.delta(text);
  }

  end(c: Completion): string {
    const counts = { promptTokens: c.promptTokens, completionTokens: c.outputTokens };
    return this.events.end([], counts, c.truncated ? 'max_tokens' : 'end_turn');
  }

  body(text: string, c: Completion): object {
    return messageObject(this.shape, {
      text,
      toolCalls: [],
      counts: { promptTokens: c.promptTokens, completionTokens: c.outputTokens },
      stopReason: c.truncated ? 'max_tokens' : 'end_turn',
    });
  }
}

export function createWire(kind: EndpointKind, id: string, model: string, includeUsage: boolean): Wire {
  switch (kind) {
    case 'ollama-generate':
      return new OllamaWire(model, false);
    case 'ollama-chat':
      return new OllamaWire(model, true);
    case 'openai-completions':
      return new OpenAIWire(`cmpl-${id}`, model, false, includeUsage);
    case 'openai-chat':
      return new OpenAIWire(`chatcmpl-${id}`, model, true, includeUsage);
    case 'openai-responses':
      return new ResponsesWire(id, model);
    case 'anthropic-messages':
      return new MessagesWire(id, model);
  }
}

/** Ollama's answer to a request without prompt or messages: it loads the model and says so. */
export function ollamaLoadBody(model: string, chat: boolean): object {
  const content = chat ? { message: { role: 'assistant', content: '' } } : { response: '' };
  return { model, created_at: new Date().toISOString(), ...content, done_reason: 'load', done: true };
}
