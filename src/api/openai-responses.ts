/**
 * OpenAI Responses API (POST /v1/responses, the Vercel AI SDK's default) on top of chat
 * completions, for backends without it (older Ollama, llama.cpp): the request becomes a chat
 * completion, the answer (whole or streamed) becomes a Response object or its SSE events.
 * The emulated engine writes its native /v1/responses answers with the same builders.
 */
import {
  chatCounts,
  chatToolCalls,
  mergeToolCallDeltas,
  type ChatCounts,
  type ToolCallDraft,
} from './chat-wire.js';
import { SseDecoder, sseEventObject } from './sse.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

export type ResponseCounts = ChatCounts;

export interface ResponseToolCall {
  readonly callId: string;
  readonly name: string;
  readonly args: string;
}

/** A content part's text (input_text, output_text, text), or '' for images and the rest. */
function partText(p: unknown): string {
  if (typeof p === 'string') return p;
  if (!isObj(p)) return '';
  return typeof p.text === 'string' ? p.text : '';
}

/** Responses content (string or parts) → chat content (string, or parts when it holds images). */
function chatContent(content: unknown): unknown {
  if (!Array.isArray(content)) return typeof content === 'string' ? content : '';
  if (!content.some((p) => isObj(p) && p.type === 'input_image')) return content.map(partText).join('');
  return content
    .filter(isObj)
    .map((p) =>
      p.type === 'input_image'
        ? { type: 'image_url', image_url: { url: str(p.image_url) } }
        : { type: 'text', text: partText(p) },
    );
}

/** The prompt as one text (instructions, then every input item's text), for routing and counting. */
export function responsesPromptText(body: Obj): string {
  const parts: string[] = [];
  if (typeof body.instructions === 'string' && body.instructions !== '') parts.push(body.instructions);
  const input = body.input;
  if (typeof input === 'string') parts.push(input);
  else if (Array.isArray(input)) {
    for (const item of input) {
      if (!isObj(item)) continue;
      const c = item.content;
      if (typeof c === 'string') parts.push(c);
      else if (Array.isArray(c)) parts.push(c.map(partText).join(''));
      else if (typeof item.output === 'string') parts.push(item.output);
    }
  }
  return parts.join('\n');
}

/** A Responses request body → the chat completions body that asks the same. */
export function responsesToChat(body: Obj, stream: boolean): Obj {
  const messages: Obj[] = [];
  if (typeof body.instructions === 'string' && body.instructions !== '')
    messages.push({ role: 'system', content: body.instructions });
  const input = body.input;
  if (typeof input === 'string') messages.push({ role: 'user', content: input });
  else if (Array.isArray(input)) {
    for (const item of input.filter(isObj)) {
      if (item.type === 'function_call') {
        // Consecutive calls belong to one assistant turn.
        const call = {
          id: str(item.call_id),
          type: 'function',
          function: { name: str(item.name), arguments: str(item.arguments) },
        };
        const last = messages[messages.length - 1];
        if (last?.role === 'assistant' && Array.isArray(last.tool_calls)) last.tool_calls.push(call);
        else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
      } else if (item.type === 'function_call_output') {
        const output = typeof item.output === 'string' ? item.output : JSON.stringify(item.output ?? '');
        messages.push({ role: 'tool', tool_call_id: str(item.call_id), content: output });
      } else if (typeof item.role === 'string') {
        // Chat completions servers know 'system'; 'developer' is the Responses name for it.
        const role = item.role === 'developer' ? 'system' : item.role;
        messages.push({ role, content: chatContent(item.content) });
      }
    }
  }
  const out: Obj = { model: body.model, messages, stream };
  if (stream) out.stream_options = { include_usage: true };
  if (typeof body.max_output_tokens === 'number') out.max_tokens = body.max_output_tokens;
  for (const k of ['temperature', 'top_p', 'seed', 'user', 'parallel_tool_calls'] as const)
    if (body[k] !== undefined && body[k] !== null) out[k] = body[k];
  if (Array.isArray(body.tools)) {
    const tools = body.tools
      .filter((t) => isObj(t) && t.type === 'function')
      .map((t) => {
        const o = t as Obj;
        return {
          type: 'function',
          function: {
            name: o.name,
            ...(o.description !== undefined ? { description: o.description } : {}),
            ...(o.parameters !== undefined ? { parameters: o.parameters } : {}),
            ...(o.strict !== undefined && o.strict !== null ? { strict: o.strict } : {}),
          },
        };
      });
    if (tools.length > 0) out.tools = tools;
  }
  const tc = body.tool_choice;
  if (typeof tc === 'string') out.tool_choice = tc;
  else if (isObj(tc) && tc.type === 'function')
    out.tool_choice = { type: 'function', function: { name: tc.name } };
  const format = isObj(body.text) && isObj(body.text.format) ? body.text.format : undefined;
  if (format?.type === 'json_object') out.response_format = { type: 'json_object' };
  else if (format?.type === 'json_schema') {
    out.response_format = {
      type: 'json_schema',
      json_schema: {
        name: typeof format.name === 'string' ? format.name : 'response',
        schema: format.schema,
        ...(typeof format.strict === 'boolean' ? { strict: format.strict } : {}),
      },
    };
  }
  return out;
}

function usageOf(c: ResponseCounts | undefined): Obj | null {
  if (!c) return null;
  return {
    input_tokens: c.promptTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: c.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: c.promptTokens + c.completionTokens,
  };
}

const messageItem = (id: string, text: string, status: string): Obj => ({
  type: 'message',
  id,
  status,
  role: 'assistant',
  content: text === '' && status === 'in_progress' ? [] : [{ type: 'output_text', text, annotations: [] }],
});

const callItem = (c: ResponseToolCall, status: string): Obj => ({
  type: 'function_call',
  id: `fc_${c.callId}`,
  call_id: c.callId,
  name: c.name,
  arguments: c.args,
  status,
});

export interface ResponseShape {
  readonly id: string;
  readonly model: string;
  /** Unix seconds. */
  readonly createdAt: number;
}

/** A whole Response object. */
export function responseObject(
  r: ResponseShape,
  out: {
    readonly text: string;
    readonly toolCalls: readonly ResponseToolCall[];
    readonly counts: ResponseCounts | undefined;
    readonly truncated: boolean;
    readonly status?: 'in_progress';
  },
): Obj {
  const status = out.status ?? (out.truncated ? 'incomplete' : 'completed');
  const output: Obj[] = [];
  if (out.status === undefined) {
    if (out.text !== '' || out.toolCalls.length === 0)
      output.push(messageItem(`msg_${r.id}`, out.text, status));
    for (const c of out.toolCalls) output.push(callItem(c, 'completed'));
  }
  return {
    id: r.id,
    object: 'response',
    created_at: r.createdAt,
    status,
    error: null,
    incomplete_details: out.truncated ? { reason: 'max_output_tokens' } : null,
    model: r.model,
    output,
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    text: { format: { type: 'text' } },
    usage: out.status === undefined ? usageOf(out.counts) : null,
  };
}

/**
 * The SSE events of a streamed Response, in the order OpenAI sends them: created, in_progress,
 * the message item and its text part, text deltas, their closing events, tool calls, completed.
 */
export class ResponseEvents {
  private seq = 0;
  private started = false;
  private text = '';
  private messageOpen = false;

  constructor(readonly shape: ResponseShape) {}

  private event(type: string, payload: Obj): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.seq++, ...payload })}\n\n`;
  }

  /** The opening events (once; every other method starts with them if not sent). */
  start(): string {
    if (this.started) return '';
    this.started = true;
    const response = responseObject(this.shape, {
      text: '',
      toolCalls: [],
      counts: undefined,
      truncated: false,
      status: 'in_progress',
    });
    return this.event('response.created', { response }) + this.event('response.in_progress', { response });
  }

  private get messageId(): string {
    return `msg_${this.shape.id}`;
  }

  delta(text: string): string {
    if (text === '') return this.start();
    let out = this.start();
    if (!this.messageOpen) out += this.openMessage();
    this.text += text;
    return (
      out +
      this.event('response.output_text.delta', {
        item_id: this.messageId,
        output_index: 0,
        content_index: 0,
        delta: text,
        logprobs: [],
      })
    );
  }

  end(
    toolCalls: readonly ResponseToolCall[],
    counts: ResponseCounts | undefined,
    truncated: boolean,
  ): string {
    let out = this.start();
    if (this.messageOpen || toolCalls.length === 0) {
      if (!this.messageOpen) out += this.openMessage();
      const id = this.messageId;
      out += this.event('response.output_text.done', {
        item_id: id,
        output_index: 0,
        content_index: 0,
        text: this.text,
        logprobs: [],
      });
      out += this.event('response.content_part.done', {
        item_id: id,
        output_index: 0,
        content_index: 0,
        part: { type: 'output_text', text: this.text, annotations: [] },
      });
      out += this.event('response.output_item.done', {
        output_index: 0,
        item: messageItem(id, this.text, 'completed'),
      });
    }
    let index = this.messageOpen ? 1 : 0;
    for (const c of toolCalls) {
      out += this.event('response.output_item.added', {
        output_index: index,
        item: { ...callItem(c, 'in_progress'), arguments: '' },
      });
      out += this.event('response.function_call_arguments.delta', {
        item_id: `fc_${c.callId}`,
        output_index: index,
        delta: c.args,
      });
      out += this.event('response.function_call_arguments.done', {
        item_id: `fc_${c.callId}`,
        output_index: index,
        arguments: c.args,
      });
      out += this.event('response.output_item.done', { output_index: index, item: callItem(c, 'completed') });
      index++;
    }
    const response = responseObject(this.shape, { text: this.text, toolCalls, counts, truncated });
    return out + this.event(truncated ? 'response.incomplete' : 'response.completed', { response });
  }

  private openMessage(): string {
    this.messageOpen = true;
    return (
      this.event('response.output_item.added', {
        output_index: 0,
        item: messageItem(this.messageId, '', 'in_progress'),
      }) +
      this.event('response.content_part.added', {
        item_id: this.messageId,
        output_index: 0,
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [] },
      })
    );
  }

  /** A stream cut by an upstream failure ends with an `error` event. */
  error(message: string): string {
    return this.start() + this.event('error', { code: 'upstream_error', message, param: null });
  }
}

const responseId = (chatId: unknown): string =>
  `resp_${typeof chatId === 'string' && chatId !== '' ? chatId.replace(/^chatcmpl-/, '') : Date.now().toString(36)}`;

/** A whole chat completion → the Response body. Undefined if the text is not one. */
export function chatToResponse(
  text: string,
  model: string,
): { body: string; counts: ResponseCounts | undefined } | undefined {
  let o: unknown;
  try {
    o = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObj(o) || !Array.isArray(o.choices)) return undefined;
  const choice = isObj(o.choices[0]) ? o.choices[0] : {};
  const msg = isObj(choice.message) ? choice.message : {};
  const counts = chatCounts(o.usage);
  const shape: ResponseShape = {
    id: responseId(o.id),
    model: typeof o.model === 'string' ? o.model : model,
    createdAt: typeof o.created === 'number' ? o.created : Math.floor(Date.now() / 1000),
  };
  const body = responseObject(shape, {
    text: str(msg.content),
    toolCalls: chatToolCalls(msg.tool_calls, 'call_').map((c) => ({
      callId: c.id,
      name: c.name,
      args: c.args,
    })),
    counts,
    truncated: choice.finish_reason === 'length',
  });
  return { body: JSON.stringify(body), counts };
}

/** Chat completions SSE → Responses SSE, incrementally (tool-call deltas are sent whole at the end). */
export class ChatSseToResponses {
  private readonly sse = new SseDecoder();
  private events: ResponseEvents | undefined;
  private truncated = false;
  private readonly calls: ToolCallDraft[] = [];
  counts: ResponseCounts | undefined;
  error: string | undefined;

  constructor(private readonly model: string) {}

  private ev(chatId: unknown): ResponseEvents {
    return (this.events ??= new ResponseEvents({
      id: responseId(chatId),
      model: this.model,
      createdAt: Math.floor(Date.now() / 1000),
    }));
  }

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
    const ev = this.ev(o.id);
    const choice = Array.isArray(o.choices) && isObj(o.choices[0]) ? o.choices[0] : undefined;
    if (!choice) return ev.start();
    if (choice.finish_reason === 'length') this.truncated = true;
    const delta = isObj(choice.delta) ? choice.delta : {};
    if (Array.isArray(delta.tool_calls)) {
      mergeToolCallDeltas(this.calls, delta.tool_calls);
    }
    return ev.delta(str(delta.content));
  }

  end(): string {
    const ev = this.ev(undefined);
    if (this.error !== undefined) return ev.error(this.error);
    const calls = this.calls.map((c, i) => ({ callId: c.id || `call_${i}`, name: c.name, args: c.args }));
    return ev.end(calls, this.counts, this.truncated);
  }
}
