import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TailBuffer, ollamaUsage, openaiUsage } from './usage.js';

test('ollama usage from the last NDJSON line, durations in ms', () => {
  const text =
    '{"response":"a","done":false}\n{"response":"","done":true,"prompt_eval_count":12,"eval_count":7,"prompt_eval_duration":2000000,"eval_duration":5000000}\n';
  assert.deepEqual(ollamaUsage(text), { promptTokens: 12, completionTokens: 7, promptEvalMs: 2, evalMs: 5 });
  assert.deepEqual(ollamaUsage('not json'), {});
  assert.deepEqual(ollamaUsage('{"eval_count":-3,"prompt_eval_count":"x"}').completionTokens, undefined);
});

test('openai usage from a body or the SSE usage chunk', () => {
  assert.deepEqual(openaiUsage('{"usage":{"prompt_tokens":3,"completion_tokens":4}}', false), {
    promptTokens: 3,
    completionTokens: 4,
  });
  const sse =
    'data: {"choices":[{"delta":{"content":"x"}}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}\n\ndata: [DONE]\n\n';
  assert.deepEqual(openaiUsage(sse, true), { promptTokens: 9, completionTokens: 2 });
  assert.deepEqual(openaiUsage('data: [DONE]\n\n', true), {});
});

test('tail buffer keeps at least the last `limit` bytes in whole chunks', () => {
  const t = new TailBuffer(8);
  for (const s of ['aaaa', 'bbbb', 'cccc', 'dd']) t.push(Buffer.from(s));
  assert.equal(t.text(), 'bbbbccccdd'); // at least the last 8 bytes, in whole chunks
  const big = new TailBuffer(2);
  big.push(Buffer.from('xyz'));
  assert.equal(big.text(), 'xyz');
});
