// The official SDKs against the emulated engine: if they parse it, the router's clients will too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { defaultProfile, startEngine } from './server.js';
import { countTokens } from './tokens.js';

test('ollama and openai SDKs talk to the emulated engine', async (t) => {
  const e = await startEngine({ port: 0, api: 'both', profile: defaultProfile(), timeScale: 50 });
  t.after(() => e.close());

  const ollama = new Ollama({ host: e.url });
  const gen = await ollama.generate({ model: 'llama3', prompt: 'hi', options: { num_predict: 5 } });
  assert.equal(gen.eval_count, 5);
  assert.equal(gen.done_reason, 'length');
  let streamed = '';
  const parts = await ollama.chat({
    model: 'llama3',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
    options: { num_predict: 6 },
  });
  for await (const p of parts) streamed += p.message.content;
  assert.equal(countTokens(streamed), 6);
  assert.deepEqual(
    (await ollama.list()).models.map((m) => m.name),
    ['llama3'],
  );

  const openai = new OpenAI({ baseURL: `${e.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const chat = await openai.chat.completions.create({
    model: 'llama3',
    messages: [{ role: 'user', content: 'hi' }],
    max_tokens: 4,
  });
  assert.equal(chat.usage?.completion_tokens, 4);
  const stream = await openai.chat.completions.create({
    model: 'llama3',
    messages: [{ role: 'user', content: 'hi' }],
    max_tokens: 7,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let completionTokens = 0;
  for await (const c of stream) {
    text += c.choices[0]?.delta.content ?? '';
    completionTokens = c.usage?.completion_tokens ?? completionTokens;
  }
  assert.equal(countTokens(text), 7);
  assert.equal(completionTokens, 7);
  const cmpl = await openai.completions.create({ model: 'llama3', prompt: 'hi', max_tokens: 3 });
  assert.equal(countTokens(cmpl.choices[0]!.text), 3);
  await assert.rejects(openai.chat.completions.create({ model: 'nope', messages: [] }), OpenAI.NotFoundError);
});
