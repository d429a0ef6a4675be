import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mergeToolCallDeltas, type ToolCallDraft } from './chat-wire.js';
import { ChatSseToResponses } from './openai-responses.js';

test('streamed tool-call deltas merge by index: id kept, name and arguments appended', () => {
  const calls: ToolCallDraft[] = [];
  mergeToolCallDeltas(calls, [{ index: 0, id: 'call_a', function: { name: 'get_', arguments: '{"ci' } }]);
  mergeToolCallDeltas(calls, [
    { index: 0, function: { name: 'weather', arguments: 'ty":"Oslo"}' } },
    { index: 1, id: 'call_b', function: { name: 'now', arguments: '{}' } },
  ]);
  mergeToolCallDeltas(calls, ['junk', { function: { name: 'x' } }]); // no index: appended
  assert.deepEqual(calls, [
    { id: 'call_a', name: 'get_weather', args: '{"city":"Oslo"}' },
    { id: 'call_b', name: 'now', args: '{}' },
    { id: '', name: 'x', args: '' },
  ]);
});

test('the Responses translator gives a streamed tool call back whole, arguments joined', () => {
  const t = new ChatSseToResponses('m1');
  const ev = (o: object): Buffer => Buffer.from(`data: ${JSON.stringify(o)}\n\n`);
  const call = (fn: object, id?: string): object => ({
    id: 'c1',
    choices: [{ index: 0, delta: { tool_calls: [{ index: 0, ...(id ? { id } : {}), function: fn }] } }],
  });
  let out = t.push(ev(call({ name: 'get_', arguments: '{"ci' }, 'call_a')));
  out += t.push(ev(call({ name: 'weather', arguments: 'ty":"Oslo"}' })));
  out += t.push(ev({ id: 'c1', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] }));
  out += t.end();
  const done = out
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => JSON.parse(l.slice(6)) as { type: string; item?: Record<string, unknown> })
    .find((e) => e.type === 'response.output_item.done');
  assert.deepEqual(
    { call_id: done?.item?.call_id, name: done?.item?.name, arguments: done?.item?.arguments },
    { call_id: 'call_a', name: 'get_weather', arguments: '{"city":"Oslo"}' },
  );
});
