import { Agent, request } from 'undici';

/** One prompt to one model: the only way the solver reaches models (through the router). */
export interface ModelCaller {
  /** `leaseId`: the admission task_id this call runs under, sent as `x-llmlb-task-id`. */
  call(model: string, prompt: string, signal?: AbortSignal, leaseId?: string): Promise<string>;
}

/** Tells the router which /schedule lease a call belongs to. */
export const TASK_ID_HEADER = 'x-llmlb-task-id';

export class ModelCallError extends Error {}

/** OpenAI `POST /v1/chat/completions` (non-streaming) at `baseUrl`: the llmlb router or any OpenAI server. */
export class OpenAiCaller implements ModelCaller {
  private readonly url: string;
  // Model calls may last minutes; the default 5-minute header timeout would cut the slowest ones.
  private readonly agent = new Agent({ headersTimeout: 0, bodyTimeout: 0, connections: 512 });

  constructor(
    baseUrl: string,
    private readonly maxTokens?: number,
  ) {
    this.url = baseUrl.replace(/\/+$/, '') + '/v1/chat/completions';
  }

  async call(model: string, prompt: string, signal?: AbortSignal, leaseId?: string): Promise<string> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (leaseId !== undefined) headers[TASK_ID_HEADER] = leaseId;
    const res = await request(this.url, {
      method: 'POST',
      dispatcher: this.agent,
      headers,
      body: JSON.stringify({
        model,
        messages: [{ role: 'user', content: prompt }],
        stream: false,
        ...(this.maxTokens !== undefined ? { max_tokens: this.maxTokens } : {}),
      }),
      ...(signal ? { signal } : {}),
    });
    const text = await res.body.text();
    if (res.statusCode !== 200)
      throw new ModelCallError(`model ${model}: HTTP ${res.statusCode} ${text.slice(0, 300)}`);
    let content: unknown;
    try {
      const j = JSON.parse(text) as { choices?: { message?: { content?: unknown } }[] };
      content = j.choices?.[0]?.message?.content;
    } catch {
      throw new ModelCallError(`model ${model}: reply is not JSON`);
    }
    if (typeof content !== 'string')
      throw new ModelCallError(`model ${model}: reply has no choices[0].message.content`);
    return content;
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}
