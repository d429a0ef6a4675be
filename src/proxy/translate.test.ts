import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SseToNdjson, ollamaToOpenAI, openAIResponseToOllama, upstreamTranslation } from './translate.js';

test('ollama chat → openai chat keeps options, format and tools', () => {
  const t = ollamaToOpenAI(
    'chat',
    {
      model: 'm',
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: '', tool_calls: [{ function: { name: 'f', arguments: { a: 1 } } }] },
      ],
      options: { num_predict: 5, temperature: 0.2, stop: ['x'], num_ctx: 4096 },
      format: 'json',
      tools: [{ type: 'function', function: { name: 'f' } }],
    },
    true,
  );
  assert.equal(t.path, '/v1/chat/completions');
  const b = JSON.parse(t.body) as Record<string, unknown>;
  assert.equal(b.max_tokens, 5);
  assert.equal(b.temperature, 0.2);
  assert.deepEqual(b.stop, ['x']);
  assert.equal(b.num_ctx, undefined);
  assert.deepEqual(b.response_format, { type: 'json_object' });
  assert.deepEqual(b.stream_options, { include_usage: true });
  const msgs = b.messages as { tool_calls?: { function: { arguments: string } }[] }[];
  assert.equal(msgs[1]?.tool_calls?.[0]?.function.arguments, '{"a":1}');
});

test('ollama generate → chat with system, or raw → completions', () => {
  const chat = JSON.parse(
    ollamaToOpenAI('generate', { model: 'm', prompt: 'p', system: 's' }, false).body,
  ) as {
    messages: unknown[];
  };
  assert.deepEqual(chat.messages, [
    { role: 'system', content: 's' },
    { role: 'user', content: 'p' },
  ]);
  const raw = ollamaToOpenAI('generate', { model: 'm', prompt: 'p', raw: true }, false);
  assert.equal(raw.path, '/v1/completions');
  assert.equal((JSON.parse(raw.body) as { prompt: string }).prompt, 'p');
});

test('openai response → ollama body with counts', () => {
  const r = openAIResponseToOllama(
    'chat',
    'm',
    JSON.stringify({
      choices: [{ message: { content: 'yo' }, finish_reason: 'length' }],
      usage: { prompt_tokens: 4, completion_tokens: 2 },
    }),
    12,
    new Date(0),
  );
  const o = JSON.parse(r!.body) as Record<string, unknown>;
  assert.deepEqual(o.message, { role: 'assistant', content: 'yo' });
  assert.equal(o.done_reason, 'length');
  assert.equal(o.prompt_eval_count, 4);
  assert.equal(o.eval_count, 2);
  assert.equal(o.total_duration, 12e6);
  assert.equal(openAIResponseToOllama('chat', 'm', 'nope', 1, new Date()), undefined);
});

test('SSE → NDJSON across chunk boundaries, usage in the closing line', () => {
  const s = new SseToNdjson('generate', 'm');
  const sse =
    'data: {"choices":[{"delta":{"content":"he"}}]}\n\ndata: {"choices":[{"delta":{"content":"llo"},"finish_reason":"stop"}]}\n\n' +
    'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\ndata: [DONE]\n\n';
  let out = '';
  for (let i = 0; i < sse.length; i += 7) out += s.push(Buffer.from(sse.slice(i, i + 7)));
  out += s.end(5);
  const lines = out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(
    lines.map((l) => l.response),
    ['he', 'llo', ''],
  );
  assert.equal(lines[2]?.done, true);
  assert.equal(lines[2]?.eval_count, 2);
  assert.equal(lines[2]?.prompt_eval_count, 3);
});

test('SSE → NDJSON from a backend that sent no usage: its text events are the eval_count', () => {
  const s = new SseToNdjson('chat', 'm');
  const sse =
    'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n' +
    'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choices":[{"delta":{"content":"b"}}]}\n\n' +
    'data: {"choices":[{"delta":{"content":"c"}}]}\n\ndata: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n' +
    'data: [DONE]\n\n';
  const out = s.push(Buffer.from(sse)) + s.end(5);
  const last = JSON.parse(out.trim().split('\n').pop()!) as Record<string, unknown>;
  assert.equal(last.eval_count, 3);
  assert.equal(last.prompt_eval_count, 0);
  assert.deepEqual(s.counted, { completionTokens: 3 });
});

test('/api/show from an OpenAI backend: context length from max_model_len, family and size from the name', () => {
  const tr = upstreamTranslation('show', { api: 'openai' }, { model: 'llama-8b' }, false)!;
  assert.equal(tr.path, '/v1/models');
  const list = {
    data: [
      { id: 'other', max_model_len: 1 },
      { id: 'llama-8b', root: 'meta-llama/Meta-Llama-3.1-8B-Instruct', max_model_len: 131072 },
    ],
  };
  const o = JSON.parse(tr.whole(JSON.stringify(list), 1)!.body) as Record<string, Record<string, unknown>>;
  assert.deepEqual(o.model_info, {
    'general.architecture': 'llama',
    'general.context_length': 131072,
    'llama.context_length': 131072,
  });
  assert.equal(o.details!.family, 'llama');
  assert.deepEqual(o.details!.families, ['llama']);
  assert.equal(o.details!.parameter_size, '8B');
  assert.equal(o.details!.parent_model, 'meta-llama/Meta-Llama-3.1-8B-Instruct');
  // A name that tells nothing still gets the context length; no entry, what the name tells.
  const bare = JSON.parse(
    upstreamTranslation('show', { api: 'openai' }, { model: 'm1' }, false)!.whole(
      '{"data":[{"id":"m1","max_model_len":8192}]}',
      1,
    )!.body,
  ) as Record<string, unknown>;
  assert.deepEqual(bare.model_info, { 'general.context_length': 8192 });
  const none = JSON.parse(tr.whole('{"data":[]}', 1)!.body) as Record<string, unknown>;
  assert.deepEqual(none.model_info, { 'general.architecture': 'llama' });
});
