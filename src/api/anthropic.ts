/**
 * Anthropic Messages API (POST /v1/messages, what Claude Code and the Anthropic SDKs speak) on top
 * of chat completions, for backends that do not serve it: the request becomes a chat completion
 * (system, content blocks, tools, tool_use and tool_result), the answer (whole or streamed)
 * becomes a Message or its named SSE events (message_start, content_block_start/delta/stop,
 * message_delta with usage, message_stop, ping). The emulated engine writes its native
 * /v1/messages answers with the same builders, so both paths give the same bytes for the same text.
 */
import {
  chatCounts,
  chatToolCalls,
  mergeToolCallDeltas,
  type ChatCounts,
  type ChatToolCall,
  type ToolCallDraft,
} from './chat-wire.js';
import { SseDecoder, sseEvent, sseEventObject } from './sse.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

export type MessageCounts = ChatCounts;
export type MessageToolCall = ChatToolCall;

/** Why generation stopped, in Anthropic's words. */
export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'refusal';

/** Text of a `system` (a string or text blocks). */
function systemText(system: unknown): string {
  if (typeof system === 'string') return system;
  if (!Array.isArray(system)) return '';
  return system.map((b) => (isObj(b) ? str(b.text) : '')).join('\n');
}

/** A tool_result's content as one text (a string, or text blocks). */
function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((b) => (isObj(b) && b.type === 'text' ? str(b.text) : '')).join('');
}

/** One message's text for routing and counting: text blocks, tool inputs and results. */
function blocksText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let out = '';
  for (const b of content) {
    if (!isObj(b)) continue;
    if (b.type === 'text') out += str(b.text);
    else if (b.type === 'tool_use') out += JSON.stringify(b.input ?? {});
    else if (b.type === 'tool_result') out += resultText(b.content);
  }
  return out;
}

/** The prompt as one text (system, then every message's), for routing, prefix locality and counting. */
export function messagesPromptText(body: Obj): string {
  const parts: string[] = [];
  const system = systemText(body.system);
  if (system !== '') parts.push(system);
  if (Array.isArray(body.messages))
    for (const m of body.messages) parts.push(isObj(m) ? blocksText(m.content) : '');
  return parts.join('\n');
}

/** What a count_tokens request counts beyond the prompt: the tool definitions. */
export function toolsText(body: Obj): string {
  return Array.isArray(body.tools) && body.tools.length > 0 ? JSON.stringify(body.tools) : '';
}

/** An image block → a chat image part (base64 as a data URL). */
function imagePart(b: Obj): Obj | undefined {
  const s = isObj(b.source) ? b.source : undefined;
  if (s?.type === 'base64')
    return { type: 'image_url', image_url: { url: `data:${str(s.media_type)};base64,${str(s.data)}` } };
  if (s?.type === 'url') return { type: 'image_url', image_url: { url: str(s.url) } };
  return undefined;
}

/** One Anthropic message → the chat messages that say the same (tool results first, as their own). */
function chatMessages(m: Obj): Obj[] {
  const role = m.role === 'assistant' ? 'assistant' : 'user';
  if (typeof m.content === 'string') return [{ role, content: m.content }];
  if (!Array.isArray(m.content)) return [{ role, content: '' }];
  const out: Obj[] = [];
  const parts: Obj[] = [];
  const calls: Obj[] = [];
  let images = false;
  for (const b of m.content.filter(isObj)) {
    if (b.type === 'text') parts.push({ type: 'text', text: str(b.text) });
    else if (b.type === 'image') {
      const p = imagePart(b);
      if (p) {
        parts.push(p);
        images = true;
      }
    } else if (b.type === 'tool_use')
      calls.push({
        id: str(b.id),
        type: 'function',
        function: { name: str(b.name), arguments: JSON.stringify(b.input ?? {}) },
      });
    else if (b.type === 'tool_result')
      out.push({ role: 'tool', tool_call_id: str(b.tool_use_id), content: resultText(b.content) });
    // thinking and other blocks have no chat completions equivalent
  }
  const text = parts.map((p) => str(p.text)).join('');
  if (role === 'assistant') {
    if (parts.length > 0 || calls.length > 0)
      out.push({
        role,
        content: parts.length > 0 ? text : null,
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
      });
  } else if (parts.length > 0 || out.length === 0) out.push({ role, content: images ? parts : text });
  return out;
}

/** An Anthropic Messages request body → the chat completions body that asks the same. */
export function messagesToChat(body: Obj, stream: boolean): Obj {
  const messages: Obj[] = [];
  const system = systemText(body.system);
  if (system !== '') messages.push({ role: 'system', content: system });
  if (Array.isArray(body.messages))
    for (const m of body.messages.filter(isObj)) messages.push(...chatMessages(m));
  const out: Obj = { model: body.model, messages, stream };
  if (stream) out.stream_options = { include_usage: true };
  if (typeof body.max_tokens === 'number') out.max_tokens = body.max_tokens;
  for (const k of ['temperature', 'top_p', 'top_k'] as const)
    if (typeof body[k] === 'number') out[k] = body[k];
  if (Array.isArray(body.stop_sequences) && body.stop_sequences.length > 0) out.stop = body.stop_sequences;
  if (isObj(body.metadata) && typeof body.metadata.user_id === 'string') out.user = body.metadata.user_id;
  if (Array.isArray(body.tools)) {
    const tools = body.tools
      .filter(
        (t): t is Obj =>
          isObj(t) && typeof t.name === 'string' && (t.type === undefined || t.type === 'custom'),
      )
      .map((t) => ({
        type: 'function',
        function: {
          name: t.name,
          ...(typeof t.description === 'string' ? { description: t.description } : {}),
          parameters: isObj(t.input_schema) ? t.input_schema : { type: 'object' },
        },
      }));
    if (tools.length > 0) out.tools = tools;
  }
  const tc = isObj(body.tool_choice) ? body.tool_choice : undefined;
  if (tc?.type === 'auto') out.tool_choice = 'auto';
  else if (tc?.type === 'any') out.tool_choice = 'required';
  else if (tc?.type === 'none') out.tool_choice = 'none';
  else if (tc?.type === 'tool') out.tool_choice = { type: 'function', function: { name: str(tc.name) } };
  if (tc?.disable_parallel_tool_use === true && out.tools !== undefined) out.parallel_tool_calls = false;
  return out;
}

export interface MessageShape {
  readonly id: string;
  readonly model: string;
}

/** A tool call's input object (its arguments parsed; `{}` when they are not a JSON object). */
function toolInput(args: string): unknown {
  try {
    const v: unknown = JSON.parse(args === '' ? '{}' : args);
    return isObj(v) ? v : {};
  } catch {
    return {};
  }
}

const usageOf = (c: MessageCounts | undefined): Obj => ({
  input_tokens: c?.promptTokens ?? 0,
  output_tokens: c?.completionTokens ?? 0,
});

/** A whole Message object. */
export function messageObject(
  m: MessageShape,
  out: {
    readonly text: string;
    readonly toolCalls: readonly MessageToolCall[];
    readonly counts: MessageCounts | undefined;
    readonly stopReason: StopReason;
    readonly stopSequence?: string | null;
  },
): Obj {
  const content: Obj[] = [];
  if (out.text !== '' || out.toolCalls.length === 0) content.push({ type: 'text', text: out.text });
  for (const c of out.toolCalls)
    content.push({ type: 'tool_use', id: c.id, name: c.name, input: toolInput(c.args) });
  return {
    id: m.id,
    type: 'message',
    role: 'assistant',
    model: m.model,
    content,
    stop_reason: out.stopReason,
    stop_sequence: out.stopSequence ?? null,
    usage: usageOf(out.counts),
  };
}

/**
 * The named SSE events of a streamed Message, in the order Anthropic sends them: message_start,
 * ping, a text block (start, text_delta…, stop), tool_use blocks (start, input_json_delta, stop),
 * message_delta (stop reason, usage), message_stop.
 */
export class MessageEvents {
  private started = false;
  private textOpen = false;
  private blocks = 0;

  constructor(
    readonly shape: MessageShape,
    /** Prompt tokens when known at the start (a native engine); a translation sends them at the end. */
    private readonly inputTokens = 0,
  ) {}

  private event(type: string, payload: Obj): string {
    return sseEvent(type, JSON.stringify({ type, ...payload }));
  }

  /** The opening events (once; every other method starts with them if not sent). */
  start(): string {
    if (this.started) return '';
    this.started = true;
    const message = {
      id: this.shape.id,
      type: 'message',
      role: 'assistant',
      model: this.shape.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: this.inputTokens, output_tokens: 0 },
    };
    return this.event('message_start', { message }) + this.event('ping', {});
  }

  private openText(): string {
    this.textOpen = true;
    return this.event('content_block_start', {
      index: this.blocks,
      content_block: { type: 'text', text: '' },
    });
  }

  delta(text: string): string {
    let out = this.start();
    if (text === '') return out;
    if (!this.textOpen) out += this.openText();
    return (
      out + this.event('content_block_delta', { index: this.blocks, delta: { type: 'text_delta', text } })
    );
  }

  end(
    toolCalls: readonly MessageToolCall[],
    counts: MessageCounts | undefined,
    stopReason: StopReason,
    stopSequence: string | null = null,
  ): string {
    let out = this.start();
    if (!this.textOpen && toolCalls.length === 0) out += this.openText();
    if (this.textOpen) {
      out += this.event('content_block_stop', { index: this.blocks });
      this.blocks++;
      this.textOpen = false;
    }
    for (const c of toolCalls) {
      const index = this.blocks++;
      out += this.event('content_block_start', {
        index,
        content_block: { type: 'tool_use', id: c.id, name: c.name, input: {} },
      });
      out += this.event('content_block_delta', {
        index,
        delta: { type: 'input_json_delta', partial_json: JSON.stringify(toolInput(c.args)) },
      });
      out += this.event('content_block_stop', { index });
    }
    out += this.event('message_delta', {
      delta: { stop_reason: stopReason, stop_sequence: stopSequence },
      usage: usageOf(counts),
    });
    return out + this.event('message_stop', {});
  }

  /** A stream cut by an upstream failure ends with an `error` event. */
  error(message: string): string {
    return this.start() + this.event('error', { error: { type: 'api_error', message } });
  }
}

/**
 * A chat finish_reason as a stop reason. A stop on one of the client's stop sequences is
 * `stop_sequence` when the server says which (vLLM's `stop_reason`).
 */
function stopOf(
  finish: unknown,
  matched: unknown,
  stops: readonly string[],
): { reason: StopReason; sequence: string | null } {
  if (finish === 'length') return { reason: 'max_tokens', sequence: null };
  if (finish === 'tool_calls' || finish === 'function_call') return { reason: 'tool_use', sequence: null };
  if (finish === 'content_filter') return { reason: 'refusal', sequence: null };
  if (typeof matched === 'string' && stops.includes(matched))
    return { reason: 'stop_sequence', sequence: matched };
  return { reason: 'end_turn', sequence: null };
}

const messageId = (chatId: unknown): string =>
  `msg_${typeof chatId === 'string' && chatId !== '' ? chatId.replace(/^chatcmpl-/, '') : Date.now().toString(36)}`;

/** A whole chat completion → the Message body. Undefined if the text is not one. */
export function chatToMessage(
  text: string,
  model: string,
  stops: readonly string[],
): { body: string; counts: MessageCounts | undefined } | undefined {
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
  const calls = chatToolCalls(msg.tool_calls, 'toolu_');
  const stop = stopOf(calls.length > 0 ? 'tool_calls' : choice.finish_reason, choice.stop_reason, stops);
  const body = messageObject(
    { id: messageId(o.id), model },
    {
      text: str(msg.content),
      toolCalls: calls,
      counts,
      stopReason: stop.reason,
      stopSequence: stop.sequence,
    },
  );
  return { body: JSON.stringify(body), counts };
}

/** The stop sequences a request names (for telling a stop-sequence stop apart). */
export const stopSequences = (body: Obj): string[] =>
  Array.isArray(body.stop_sequences)
    ? body.stop_sequences.filter((s): s is string => typeof s === 'string')
    : [];

/** Chat completions SSE → Anthropic Messages SSE, incrementally (tool calls are sent whole at the end). */
export class ChatSseToMessages {
  private readonly sse = new SseDecoder();
  private events: MessageEvents | undefined;
  private finish: unknown;
  private matched: unknown;
  private readonly calls: ToolCallDraft[] = [];
  /** Events that carried text or a tool call: the token count when the backend sent no usage. */
  private contentEvents = 0;
  usage: MessageCounts | undefined;
  error: string | undefined;

  constructor(
    private readonly model: string,
    private readonly stops: readonly string[],
  ) {}

  private ev(chatId: unknown): MessageEvents {
    return (this.events ??= new MessageEvents({ id: messageId(chatId), model: this.model }));
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
    if (counts) this.usage = counts;
    const ev = this.ev(o.id);
    const choice = Array.isArray(o.choices) && isObj(o.choices[0]) ? o.choices[0] : undefined;
    if (!choice) return ev.start();
    if (choice.finish_reason !== undefined && choice.finish_reason !== null) {
      this.finish = choice.finish_reason;
      this.matched = choice.stop_reason;
    }
    const delta = isObj(choice.delta) ? choice.delta : {};
    if (Array.isArray(delta.tool_calls)) {
      this.contentEvents++;
      mergeToolCallDeltas(this.calls, delta.tool_calls);
    }
    const text = str(delta.content);
    if (text !== '') this.contentEvents++;
    return ev.delta(text);
  }

  /** The usage the backend sent, else (it ignored include_usage) its content events counted. */
  get counts(): Partial<MessageCounts> {
    return this.usage ?? { completionTokens: this.contentEvents };
  }

  end(): string {
    const ev = this.ev(undefined);
    if (this.error !== undefined) return ev.error(this.error);
    const calls = this.calls.map((c, i) => ({ id: c.id || `toolu_${i}`, name: c.name, args: c.args }));
    const stop = stopOf(calls.length > 0 ? 'tool_calls' : this.finish, this.matched, this.stops);
    const c = this.counts;
    const counts = { promptTokens: c.promptTokens ?? 0, completionTokens: c.completionTokens ?? 0 };
    return ev.end(calls, counts, stop.reason, stop.sequence);
  }
}
