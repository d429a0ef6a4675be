/**
 * Ollama API ⇄ OpenAI API, for an Ollama-API request routed to an `api: openai` backend (vLLM,
 * SGLang). Only this path re-serialises bodies; same-API traffic is forwarded byte for byte.
 *
 * /api/chat → /v1/chat/completions. /api/generate → /v1/chat/completions with the system and
 * prompt as messages (Ollama applies the model's chat template to generate prompts, and so does
 * a chat endpoint), or → /v1/completions when `raw: true` (no template, as Ollama does).
 */

export type OllamaKind = 'generate' | 'chat';

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

interface Counts {
  promptTokens: number;
  completionTokens: number;
}

function usageCounts(u: unknown): Counts | undefined {
  if (!isObj(u)) return undefined;
  const p = typeof u.prompt_tokens === 'number' ? u.prompt_tokens : 0;
  const c = typeof u.completion_tokens === 'number' ? u.completion_tokens : 0;
  return { promptTokens: p, completionTokens: c };
}

/** Ollama's closing fields; durations are what the router measured, in ns (no engine timings). */
function doneFields(doneReason: string, counts: Counts | undefined, totalMs: number): Obj {
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
  const counts = usageCounts(o.usage);
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
  private buf = '';
  private doneReason = 'stop';
  private toolCalls: { name: string; args: string }[] = [];
  counts: Counts | undefined;
  error: string | undefined;

  constructor(
    private readonly kind: OllamaKind,
    private readonly model: string,
  ) {}

  push(chunk: Buffer): string {
    this.buf += chunk.toString('utf8');
    let out = '';
    let sep: number;
    while ((sep = this.buf.indexOf('\n\n')) >= 0) {
      const event = this.buf.slice(0, sep);
      this.buf = this.buf.slice(sep + 2);
      out += this.event(event);
    }
    return out;
  }

  private event(event: string): string {
    let data = '';
    for (const line of event.split('\n')) {
      const l = line.endsWith('\r') ? line.slice(0, -1) : line;
      if (l.startsWith('data:')) data += l.slice(l[5] === ' ' ? 6 : 5);
    }
    if (data === '' || data === '[DONE]') return '';
    let o: unknown;
    try {
      o = JSON.parse(data);
    } catch {
      return '';
    }
    if (!isObj(o)) return '';
    if (isObj(o.error)) this.error = typeof o.error.message === 'string' ? o.error.message : 'upstream error';
    const counts = usageCounts(o.usage);
    if (counts) this.counts = counts;
    const choice = Array.isArray(o.choices) && isObj(o.choices[0]) ? o.choices[0] : undefined;
    if (!choice) return '';
    if (choice.finish_reason) this.doneReason = finishToDone(choice.finish_reason);
    const delta = isObj(choice.delta) ? choice.delta : undefined;
    if (delta && Array.isArray(delta.tool_calls)) {
      for (const tc of delta.tool_calls.filter(isObj)) {
        const i = typeof tc.index === 'number' ? tc.index : this.toolCalls.length;
        const fn = isObj(tc.function) ? tc.function : {};
        const cur = (this.toolCalls[i] ??= { name: '', args: '' });
        if (typeof fn.name === 'string') cur.name += fn.name;
        if (typeof fn.arguments === 'string') cur.args += fn.arguments;
      }
    }
    const text =
      typeof delta?.content === 'string' ? delta.content : typeof choice.text === 'string' ? choice.text : '';
    if (text === '') return '';
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
    return out + JSON.stringify({ ...head, ...doneFields(this.doneReason, this.counts, totalMs) }) + '\n';
  }
}
