import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChatSseToMessages, chatToMessage, messagesPromptText, messagesToChat } from './anthropic.js';
import { sseEventObject } from './sse.js';

test('messagesToChat: system blocks, images, tool_use and tool_result, options, tool_choice', () => {
  const chat = messagesToChat(
    {
      model: 'm',
      max_tokens: 10,
      system: [
        { type: 'text', text: 'a' },
        { type: 'text', text: 'b' },
      ],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'look' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAA' } },
          ],
        },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'calling' },
            { type: 'tool_use', id: 't1', name: 'f', input: { x: 1 } },
            { type: 'tool_use', id: 't2', name: 'g', input: {} },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 't1', content: 'one' },
            { type: 'tool_result', tool_use_id: 't2', content: [{ type: 'text', text: 'two' }] },
            { type: 'text', text: 'thanks' },
          ],
        },
      ],
      stop_sequences: ['END'],
      temperature: 0.5,
      top_k: 3,
      metadata: { user_id: 'u' },
      tools: [
        { name: 'f', input_schema: { type: 'object' } },
        { type: 'web_search_20250305', name: 'web' },
      ],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
    },
    false,
  );
  assert.deepEqual(chat, {
    model: 'm',
    stream: false,
    max_tokens: 10,
    temperature: 0.5,
    top_k: 3,
    stop: ['END'],
    user: 'u',
    messages: [
      { role: 'system', content: 'a\nb' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAA' } },
        ],
      },
      {
        role: 'assistant',
        content: 'calling',
        tool_calls: [
          { id: 't1', type: 'function', function: { name: 'f', arguments: '{"x":1}' } },
          { id: 't2', type: 'function', function: { name: 'g', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 't1', content: 'one' },
      { role: 'tool', tool_call_id: 't2', content: 'two' },
      { role: 'user', content: 'thanks' },
    ],
    // Server tools (web search) have no chat completions equivalent.
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
    tool_choice: 'required',
    parallel_tool_calls: false,
  });
  const named = messagesToChat(
    { model: 'm', messages: [], tools: [{ name: 'f' }], tool_choice: { type: 'tool', name: 'f' } },
    true,
  );
  assert.deepEqual(named.tool_choice, { type: 'function', function: { name: 'f' } });
  assert.deepEqual(named.stream_options, { include_usage: true });
});

test('messagesPromptText: system, text, tool inputs and results in order', () => {
  assert.equal(
    messagesPromptText({
      system: 's',
      messages: [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: [{ type: 'tool_use', input: { a: 1 } }] },
        { role: 'user', content: [{ type: 'tool_result', content: 'r' }] },
      ],
    }),
    's\nq\n{"a":1}\nr',
  );
});

test('chatToMessage: stop reasons (length, tool calls, a named stop sequence), usage, not a completion', () => {
  const one = (choice: object): Record<string, unknown> =>
    JSON.parse(
      chatToMessage(
        JSON.stringify({
          id: 'chatcmpl-x',
          choices: [choice],
          usage: { prompt_tokens: 3, completion_tokens: 2 },
        }),
        'm',
        ['END'],
      )!.body,
    ) as Record<string, unknown>;
  const len = one({ message: { content: 'ab' }, finish_reason: 'length' });
  assert.equal(len.stop_reason, 'max_tokens');
  assert.equal(len.id, 'msg_x');
  assert.deepEqual(len.usage, { input_tokens: 3, output_tokens: 2 });
  assert.deepEqual(len.content, [{ type: 'text', text: 'ab' }]);
  const stop = one({ message: { content: 'ab' }, finish_reason: 'stop', stop_reason: 'END' });
  assert.deepEqual([stop.stop_reason, stop.stop_sequence], ['stop_sequence', 'END']);
  const eos = one({ message: { content: 'ab' }, finish_reason: 'stop', stop_reason: 2 });
  assert.deepEqual([eos.stop_reason, eos.stop_sequence], ['end_turn', null]);
  const call = one({
    message: { content: 'let me', tool_calls: [{ id: 'c', function: { name: 'f', arguments: 'not json' } }] },
    finish_reason: 'stop',
  });
  assert.equal(call.stop_reason, 'tool_use');
  assert.deepEqual(call.content, [
    { type: 'text', text: 'let me' },
    { type: 'tool_use', id: 'c', name: 'f', input: {} },
  ]);
  assert.equal(chatToMessage('{"error":{}}', 'm', []), undefined);
  assert.equal(chatToMessage('nope', 'm', []), undefined);
});

test('ChatSseToMessages: any chunking gives the same events; tool calls whole at the end; errors', () => {
  const ev = (o: object): string => `data: ${JSON.stringify({ id: 'chatcmpl-s', ...o })}\n\n`;
  const upstream =
    ev({ choices: [{ delta: { role: 'assistant', content: 'Hé' }, finish_reason: null }] }) +
    ev({ choices: [{ delta: { content: 'llo' }, finish_reason: null }] }) +
    ev({
      choices: [
        { delta: { tool_calls: [{ index: 0, id: 'c1', function: { name: 'f', arguments: '{"a"' } }] } },
      ],
    }) +
    ev({ choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: ':1}' } }] } }] }) +
    ev({ choices: [{ delta: {}, finish_reason: 'tool_calls' }] }) +
    ev({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 3 } }) +
    'data: [DONE]\n\n';
  const bytes = Buffer.from(upstream);
  const run = (size: number): string => {
    const c = new ChatSseToMessages('m', []);
    let out = '';
    for (let i = 0; i < bytes.length; i += size) out += c.push(bytes.subarray(i, i + size));
    assert.deepEqual(c.counts, { promptTokens: 4, completionTokens: 3 });
    return out + c.end();
  };
  const whole = run(bytes.length);
  for (const size of [1, 3, 17]) assert.equal(run(size), whole, `chunks of ${size}`);
  const events = whole
    .trim()
    .split('\n\n')
    .map((e) => ({ name: /^event: (\w+)/.exec(e)?.[1], data: sseEventObject(e)! }));
  assert.deepEqual(
    events.map((e) => e.name),
    [
      'message_start',
      'ping',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ],
  );
  for (const e of events) assert.equal(e.data.type, e.name);
  assert.deepEqual(events[3]!.data.delta, { type: 'text_delta', text: 'Hé' });
  assert.deepEqual(events[6]!.data.content_block, { type: 'tool_use', id: 'c1', name: 'f', input: {} });
  assert.deepEqual(events[7]!.data.delta, { type: 'input_json_delta', partial_json: '{"a":1}' });
  assert.deepEqual(events[9]!.data, {
    type: 'message_delta',
    delta: { stop_reason: 'tool_use', stop_sequence: null },
    usage: { input_tokens: 4, output_tokens: 3 },
  });

  const broken = new ChatSseToMessages('m', []);
  const end = broken.push(Buffer.from(ev({ error: { message: 'boom' } }))) + broken.end();
  assert.match(end, /^event: message_start/);
  assert.match(end, /event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"boom"\}\}/);
});
