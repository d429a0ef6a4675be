import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TailBuffer, ollamaUsage, openaiUsage, responseUsage, usageOf, anthropicUsage } from './usage.js';

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

test('counts are read in place from the end of a long answer, and agree with a full parse', () => {
  const answer = 'word '.repeat(50_000); // a 250 kB non-streamed answer
  const ollama = JSON.stringify({
    model: 'm',
    response: `${answer} "eval_count": 999, {"eval_count":1}`, // look-alikes inside the text
    done: true,
    context: Array.from({ length: 2000 }, (_, i) => i),
    prompt_eval_count: 12,
    prompt_eval_duration: 2_000_000,
    eval_count: 7,
    eval_duration: 5_000_000,
  });
  const want = { promptTokens: 12, completionTokens: 7, promptEvalMs: 2, evalMs: 5 };
  assert.deepEqual(ollamaUsage(ollama), want);
  const t = new TailBuffer(1 << 20);
  for (let i = 0; i < ollama.length; i += 1000) t.push(Buffer.from(ollama.slice(i, i + 1000)));
  assert.deepEqual(responseUsage(t, 'ollama', false), want);

  const openai = JSON.stringify({
    choices: [{ message: { content: `${answer} "usage": {"completion_tokens": 5}` } }],
    usage: { prompt_tokens: 3, completion_tokens: 4, prompt_tokens_details: { cached_tokens: 1 } },
  });
  const o = new TailBuffer(1 << 20);
  o.push(Buffer.from(openai));
  // The prefix-cache hit (vLLM, SGLang, OpenAI: prompt_tokens_details.cached_tokens) comes along.
  assert.deepEqual(responseUsage(o, 'openai', false), {
    promptTokens: 3,
    completionTokens: 4,
    cachedTokens: 1,
  });
  // Pretty-printed and with the counts early: found by the full parse.
  const early = JSON.stringify({ usage: { prompt_tokens: 2, completion_tokens: 6 }, text: answer }, null, 2);
  const e = new TailBuffer(1 << 20);
  e.push(Buffer.from(early));
  assert.deepEqual(responseUsage(e, 'openai', false), { promptTokens: 2, completionTokens: 6 });
  const ollamaEarly = JSON.stringify({ eval_count: 3, prompt_eval_count: 1, response: answer, done: true });
  const oe = new TailBuffer(1 << 20);
  oe.push(Buffer.from(ollamaEarly));
  assert.equal(responseUsage(oe, 'ollama', false).completionTokens, 3);
});

test('cached prompt tokens: OpenAI-style details, llama.cpp timings, and nothing made up', () => {
  assert.deepEqual(
    usageOf({
      usage: { prompt_tokens: 9, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 8 } },
    }),
    {
      promptTokens: 9,
      completionTokens: 2,
      cachedTokens: 8,
    },
  );
  // llama.cpp's server: timings.cache_n beside the usage (its final stream chunk, or the body).
  assert.equal(usageOf({ usage: { prompt_tokens: 9 }, timings: { cache_n: 5 } })?.cachedTokens, 5);
  // Absent, null, negative or not a number: no cached count at all (not 0).
  for (const details of [undefined, null, { cached_tokens: -1 }, { cached_tokens: '3' }, {}]) {
    const u = usageOf({ usage: { prompt_tokens: 9, completion_tokens: 2, prompt_tokens_details: details } });
    assert.equal(u?.cachedTokens, undefined);
    assert.equal('cachedTokens' in (u ?? {}), false);
  }
});

test('Ollama counts from the raw bytes: a final line split over chunks, look-alikes and bad values', () => {
  const lines =
    '{"response":"\\"eval_count\\": 5,","done":false}\n' +
    '{"response":"","done":true,"prompt_eval_count":12,"prompt_eval_duration":2000000,"eval_count":7,"eval_duration":5000000}\n';
  for (const size of [1, 7, 40, 512, lines.length]) {
    const t = new TailBuffer(4096);
    for (let i = 0; i < lines.length; i += size) t.push(Buffer.from(lines.slice(i, i + size)));
    assert.deepEqual(
      responseUsage(t, 'ollama', true),
      { promptTokens: 12, completionTokens: 7, promptEvalMs: 2, evalMs: 5 },
      `chunks of ${size}`,
    );
  }
  const only = (s: string) => {
    const t = new TailBuffer(4096);
    t.push(Buffer.from(s));
    return responseUsage(t, 'ollama', false);
  };
  // Counts only on an earlier line: the final line has none.
  assert.equal(only('{"eval_count":3}\n{"done":true}').completionTokens, undefined);
  assert.equal(only('{"done":true, "eval_count" : 4 }').completionTokens, 4);
  assert.equal(only('{"done":true,"eval_count":-4}').completionTokens, undefined);
  assert.equal(only('{"done":true,"eval_count":1e}').completionTokens, undefined);
  assert.equal(only('{"done":true,"eval_count":9').completionTokens, undefined); // cut short
});

test('tail buffer hands back the last bytes without copying more chunks than needed', () => {
  const t = new TailBuffer(1 << 20);
  for (const s of ['aaaa', 'bbbb', 'cccc', 'dd']) t.push(Buffer.from(s));
  assert.equal(t.lastBytes(2).toString(), 'dd');
  assert.equal(t.lastBytes(5).toString(), 'ccccdd');
  assert.equal(t.lastBytes(100).toString(), 'aaaabbbbccccdd');
  assert.equal(t.text(5), 'cccdd');
  assert.equal(t.text(), 'aaaabbbbccccdd');
  assert.equal(new TailBuffer(8).lastBytes(4).length, 0);
});

test('anthropicUsage: a body, a stream (message_delta, message_start for the input), cache reads', () => {
  const body =
    '{"id":"msg_1","content":[{"type":"text","text":"a \\"usage\\": {"}],' +
    '"usage":{"input_tokens":5,"output_tokens":7,"cache_read_input_tokens":2}}';
  assert.deepEqual(anthropicUsage(body, false), { promptTokens: 5, completionTokens: 7, cachedTokens: 2 });
  const start =
    'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}\n\n';
  const end =
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}\n\n' +
    'event: message_stop\ndata: {"type":"message_stop"}\n\n';
  assert.deepEqual(anthropicUsage(end, true, start), { promptTokens: 9, completionTokens: 4 });
  const newer = end.replace('"output_tokens":4', '"input_tokens":11,"output_tokens":4');
  assert.deepEqual(anthropicUsage(newer, true, start), { promptTokens: 11, completionTokens: 4 });
  assert.deepEqual(anthropicUsage('event: ping\ndata: {}\n\n', true), {});
});
