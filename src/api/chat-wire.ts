/**
 * What the translators read from a chat completion (whole or one streamed chunk), in one place:
 * its token counts and its tool calls. The Responses, Anthropic and Ollama translators all
 * translate from chat completions.
 */

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface ChatCounts {
  readonly promptTokens: number;
  readonly completionTokens: number;
}

export interface ChatToolCall {
  readonly id: string;
  readonly name: string;
  /** The arguments as the model wrote them: a JSON object's text. */
  readonly args: string;
}

/** A chat `usage` object's counts (a missing field counts 0), or undefined where there is none. */
export function chatCounts(u: unknown): ChatCounts | undefined {
  if (!isObj(u)) return undefined;
  return {
    promptTokens: typeof u.prompt_tokens === 'number' ? u.prompt_tokens : 0,
    completionTokens: typeof u.completion_tokens === 'number' ? u.completion_tokens : 0,
  };
}

/** A message's `tool_calls`; a call without an id gets `<idPrefix><its index>`. */
export function chatToolCalls(calls: unknown, idPrefix: string): ChatToolCall[] {
  if (!Array.isArray(calls)) return [];
  return calls.filter(isObj).map((tc, i) => {
    const fn = isObj(tc.function) ? tc.function : {};
    return {
      id: typeof tc.id === 'string' && tc.id !== '' ? tc.id : `${idPrefix}${i}`,
      name: typeof fn.name === 'string' ? fn.name : '',
      args: typeof fn.arguments === 'string' ? fn.arguments : JSON.stringify(fn.arguments ?? {}),
    };
  });
}

/** A tool call as a stream delivers it: its name and arguments arrive in pieces. */
export interface ToolCallDraft {
  id: string;
  name: string;
  args: string;
}

/** Merges a streamed chunk's `delta.tool_calls` into `calls` by their index (appended where none). */
export function mergeToolCallDeltas(calls: ToolCallDraft[], deltas: readonly unknown[]): void {
  for (const tc of deltas) {
    if (!isObj(tc)) continue;
    const i = typeof tc.index === 'number' ? tc.index : calls.length;
    const fn = isObj(tc.function) ? tc.function : {};
    const cur = (calls[i] ??= { id: '', name: '', args: '' });
    if (typeof tc.id === 'string') cur.id = tc.id;
    if (typeof fn.name === 'string') cur.name += fn.name;
    if (typeof fn.arguments === 'string') cur.args += fn.arguments;
  }
}
