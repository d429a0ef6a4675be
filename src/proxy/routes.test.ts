import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ENDPOINTS, WORKLOAD_APIS, traceApiOf, type EndpointName } from '../api/endpoints.js';
import { BadRequest, PROXY_ROUTES, parseBody } from './routes.js';

/**
 * Every endpoint's smallest valid body and what the router reads from it. A new descriptor in
 * src/api/endpoints.ts fails the first test until it has its row here.
 */
const SAMPLES: Record<EndpointName, { body: object; stream: boolean; prompt: string; max?: number }> = {
  'ollama-generate': { body: { model: 'm', prompt: 'hi', system: 's' }, stream: true, prompt: 's\nhi' },
  'ollama-chat': {
    body: { model: 'm', messages: [{ role: 'user', content: 'hi' }], options: { num_predict: 5 } },
    stream: true,
    prompt: 'hi',
    max: 5,
  },
  'openai-completions': {
    body: { model: 'm', prompt: 'hi', max_tokens: 3 },
    stream: false,
    prompt: 'hi',
    max: 3,
  },
  'openai-chat': {
    body: { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true },
    stream: true,
    prompt: 'hi',
  },
  'ollama-embed': { body: { model: 'm', input: ['a', 'b'] }, stream: false, prompt: 'a\nb' },
  'ollama-embeddings': { body: { model: 'm', prompt: 'a' }, stream: false, prompt: 'a' },
  'ollama-show': { body: { name: 'm' }, stream: false, prompt: '' },
  'openai-embeddings': { body: { model: 'm', input: 'a' }, stream: false, prompt: 'a' },
  'openai-responses': {
    body: { model: 'm', input: 'hi', instructions: 'be', max_output_tokens: 4, stream: true },
    stream: true,
    prompt: 'be\nhi',
    max: 4,
  },
  'anthropic-messages': {
    body: {
      model: 'm',
      system: [{ type: 'text', text: 'be' }],
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: { a: 1 } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'ok' }] },
      ],
      max_tokens: 8,
      stream: true,
    },
    stream: true,
    prompt: 'be\nhi\n{"a":1}\nok',
    max: 8,
  },
  'anthropic-count-tokens': {
    body: { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] },
    stream: false,
    prompt: 'hi',
  },
};

test('every descriptor is routed at its path and aliases, and parses its sample body', () => {
  const routed = new Set<string>();
  for (const e of ENDPOINTS) {
    const sample = SAMPLES[e.name];
    assert.ok(sample, `${e.name}: no sample in routes.test.ts`);
    for (const p of [e.path, ...e.aliases]) {
      const r = PROXY_ROUTES.get(p);
      assert.equal(r?.endpoint, e, p);
      assert.equal(r.upstreamPath, e.path);
      assert.equal(r.api, e.api);
      routed.add(p);
    }
    const { parsed } = parseBody(PROXY_ROUTES.get(e.path)!, Buffer.from(JSON.stringify(sample.body)));
    assert.deepEqual(
      { model: parsed.model, stream: parsed.stream, prompt: parsed.promptText, max: parsed.maxTokens },
      { model: 'm', stream: sample.stream, prompt: sample.prompt, max: sample.max },
      e.name,
    );
  }
  assert.deepEqual([...PROXY_ROUTES.keys()].sort(), [...routed].sort());
});

test('PROXY_ROUTES keeps its shape: api, upstreamPath, chat, body (non-generation), translate', () => {
  const chat = PROXY_ROUTES.get('/api/chat')!;
  assert.deepEqual(
    { api: chat.api, up: chat.upstreamPath, chat: chat.chat, body: chat.body, tr: chat.translate },
    { api: 'ollama', up: '/api/chat', chat: true, body: undefined, tr: 'chat' },
  );
  assert.equal(PROXY_ROUTES.get('/ollama/generate')!.upstreamPath, '/api/generate');
  const emb = PROXY_ROUTES.get('/v1/embeddings')!;
  assert.deepEqual([emb.body, emb.translate, emb.chat], ['embed', undefined, false]);
  assert.equal(PROXY_ROUTES.get('/v1/responses')!.body, 'responses');
});

test('workload APIs and trace names come from the descriptors', () => {
  assert.deepEqual(WORKLOAD_APIS, ['ollama-generate', 'ollama-chat', 'openai-completions', 'openai-chat']);
  const traced = Object.fromEntries(ENDPOINTS.map((e) => [e.name, traceApiOf(e)]));
  assert.equal(traced['openai-chat'], 'openai-chat');
  assert.equal(traced['openai-responses'], 'openai-completions');
  assert.equal(traced['ollama-embed'], undefined);
  assert.equal(traced['ollama-show'], undefined);
  assert.equal(traced['anthropic-messages'], 'openai-chat');
  assert.equal(traced['anthropic-count-tokens'], undefined);
});

test('a body without its model is a 400 in every endpoint', () => {
  for (const e of ENDPOINTS)
    assert.throws(
      () => parseBody(PROXY_ROUTES.get(e.path)!, Buffer.from('{"prompt":"x","input":"x"}')),
      (err: unknown) => err instanceof BadRequest && err.code === 'missing_model',
      e.name,
    );
});

test('Anthropic bodies: messages and max_tokens are required, turns are user/assistant', () => {
  const route = PROXY_ROUTES.get('/v1/messages')!;
  const bad = (o: object): string => {
    try {
      parseBody(route, Buffer.from(JSON.stringify(o)));
    } catch (err) {
      if (err instanceof BadRequest) return err.code;
    }
    return 'accepted';
  };
  const msgs = [{ role: 'user', content: 'hi' }];
  assert.equal(bad({ model: 'm', max_tokens: 1 }), 'invalid_messages');
  assert.equal(bad({ model: 'm', messages: msgs }), 'invalid_max_tokens');
  assert.equal(
    bad({ model: 'm', messages: [{ role: 'system', content: 'x' }], max_tokens: 1 }),
    'invalid_messages',
  );
  assert.equal(bad({ model: 'm', messages: [{ role: 'user' }], max_tokens: 1 }), 'invalid_messages');
  assert.equal(bad({ model: 'm', messages: msgs, max_tokens: 1, system: 3 }), 'invalid_system');
  assert.equal(bad({ model: 'm', messages: msgs, max_tokens: 1 }), 'accepted');
  const { parsed } = parseBody(
    route,
    Buffer.from(JSON.stringify({ model: 'm', messages: msgs, max_tokens: 1, metadata: { user_id: 'u1' } })),
  );
  assert.equal(parsed.user, 'u1');
});
