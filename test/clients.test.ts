// Every client route through the router with the clients people use: the official openai and ollama
// SDKs, LangChain JS and the Vercel AI SDK. Two emulated engines: `a` speaks Ollama (and /v1/*,
// /v1/responses included) and serves m1; `b` is an OpenAI-API engine without /v1/responses
// serving m2, so Ollama routes and Responses requests for m2 are translated. Each request must
// land on the backend serving its model.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOllama, OllamaEmbeddings } from '@langchain/ollama';
import { ChatOpenAI, OpenAIEmbeddings } from '@langchain/openai';
import { embed, generateText, streamText } from 'ai';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { defaultProfile, OUTPUT_TOKENS_HEADER, type EngineServer } from '../src/engine/server.js';
import type { Router } from '../src/proxy/router.js';
import { backend, engine, post, router, settings, stallHealth, waitFor } from './helpers.js';

describe('client routes through the router', () => {
  let a: EngineServer;
  let b: EngineServer;
  let r: Router;
  let url: string;

  before(async () => {
    a = await engine({ name: 'a', models: ['m1'] });
    b = await engine({ name: 'b', api: 'openai', models: ['m2'], responses: false });
    ({ router: r, url } = await router(
      settings([
        backend('a', a.url, { models: ['m1'] }),
        backend('b', b.url, { api: 'openai', models: ['m2'] }),
      ]),
    ));
    await waitFor(
      () => r.fleet.get('a')?.responsesApi === true && r.fleet.get('b')?.responsesApi === false,
      3000,
      'responses capability learned',
    );
  });
  after(async () => {
    await r.close();
    await Promise.all([a.close(), b.close()]);
  });

  /** Which backend answered a raw request. */
  const via = async (
    path: string,
    body: unknown,
  ): Promise<{ status: number; backend: string | null; json: unknown }> => {
    const res = await post(`${url}${path}`, body);
    return { status: res.status, backend: res.headers.get('x-llmlb-backend'), json: await res.json() };
  };

  test('GET / and HEAD / answer like Ollama; HEAD works on GET routes', async () => {
    const get = await fetch(`${url}/`);
    assert.equal(get.status, 200);
    assert.equal(await get.text(), 'Ollama is running');
    for (const p of [
      '/',
      '/api/tags',
      '/api/version',
      '/v1/models',
      '/healthz',
      '/v1/models/m1',
      '/api/ps',
    ]) {
      const head = await fetch(`${url}${p}`, { method: 'HEAD' });
      assert.equal(head.status, 200, p);
      assert.equal((await head.arrayBuffer()).byteLength, 0, p);
    }
    const wrong = await fetch(`${url}/`, { method: 'DELETE' });
    assert.equal(wrong.status, 405);
    await wrong.arrayBuffer();
  });

  test('official ollama client: show, ps (fleet-wide), embed, embeddings, chat', async () => {
    const ollama = new Ollama({ host: url });
    const show = await ollama.show({ model: 'm1' });
    assert.equal(show.details.family, 'llama');
    const shown2 = await ollama.show({ model: 'm2' }); // an OpenAI backend: translated
    assert.deepEqual(shown2.capabilities, ['completion']);
    await assert.rejects(ollama.show({ model: 'nope' }), /not found/);
    const ps = await ollama.ps();
    assert.deepEqual(ps.models.map((m) => m.name).sort(), ['m1', 'm2']);
    const e1 = await ollama.embed({ model: 'm1', input: ['hello', 'world'] });
    assert.equal(e1.embeddings.length, 2);
    assert.notDeepEqual(e1.embeddings[0], e1.embeddings[1]);
    const e2 = await ollama.embed({ model: 'm2', input: 'hello' });
    assert.equal(e2.embeddings.length, 1);
    assert.equal(e2.embeddings[0]!.length, 32);
    const legacy = await ollama.embeddings({ model: 'm2', prompt: 'hello' });
    assert.deepEqual(legacy.embedding, e2.embeddings[0]);
    const chat = await ollama.chat({
      model: 'm2',
      messages: [{ role: 'user', content: 'hi' }],
      options: { num_predict: 3 },
    });
    assert.equal(chat.eval_count, 3);

    assert.equal((await via('/api/embed', { model: 'm1', input: 'x' })).backend, 'a');
    assert.equal((await via('/api/embed', { model: 'm2', input: 'x' })).backend, 'b');
    assert.equal((await via('/api/show', { name: 'm1' })).backend, 'a');
    assert.equal((await via('/api/show', { model: 'm2' })).backend, 'b');
  });

  test('official openai client: models.retrieve, embeddings, responses (native and translated, streamed)', async () => {
    const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
    assert.equal((await openai.models.retrieve('m2')).id, 'm2');
    await assert.rejects(openai.models.retrieve('nope'), OpenAI.NotFoundError);
    const emb = await openai.embeddings.create({ model: 'm1', input: ['a', 'b'] });
    assert.equal(emb.data.length, 2);
    assert.equal(emb.data[0]!.embedding.length, 32);
    const floats = await openai.embeddings.create({ model: 'm2', input: 'a', encoding_format: 'float' });
    assert.ok(Math.abs(Math.hypot(...floats.data[0]!.embedding) - 1) < 1e-6);

    for (const model of ['m1', 'm2']) {
      const resp = await openai.responses.create({ model, input: 'hi', max_output_tokens: 4 });
      assert.equal(resp.status, 'incomplete', model);
      assert.equal(resp.usage?.output_tokens, 4, model);
      assert.ok(resp.output_text.length > 0, model);
      const stream = await openai.responses.create({
        model,
        instructions: 'be brief',
        input: [{ role: 'user', content: 'hi' }],
        max_output_tokens: 5,
        stream: true,
      });
      let text = '';
      let done: OpenAI.Responses.Response | undefined;
      for await (const ev of stream) {
        if (ev.type === 'response.output_text.delta') text += ev.delta;
        if (ev.type === 'response.incomplete' || ev.type === 'response.completed') done = ev.response;
      }
      assert.ok(text.length > 0, model);
      assert.equal(done?.usage?.output_tokens, 5, model);
    }
    assert.equal(
      (await via('/v1/responses', { model: 'm1', input: 'x', max_output_tokens: 2 })).backend,
      'a',
    );
    assert.equal(
      (await via('/v1/responses', { model: 'm2', input: 'x', max_output_tokens: 2 })).backend,
      'b',
    );
    assert.equal((await via('/v1/embeddings', { model: 'm2', input: 'x' })).backend, 'b');
  });

  test('bad bodies on the new routes are 4xx in the route API format', async () => {
    const noInput = await via('/v1/responses', { model: 'm1' });
    assert.equal(noInput.status, 400);
    assert.match(JSON.stringify(noInput.json), /"message":"input must be/);
    const prev = await via('/v1/responses', { model: 'm1', input: 'x', previous_response_id: 'resp_1' });
    assert.equal(prev.status, 400);
    const badEmbed = await via('/api/embed', { model: 'm1', input: 7 });
    assert.equal(badEmbed.status, 400);
    assert.equal(typeof (badEmbed.json as { error: unknown }).error, 'string');
    const unknown = await via('/v1/embeddings', { model: 'zz', input: 'x' });
    assert.equal(unknown.status, 404);
    const noModel = await via('/api/show', {});
    assert.equal(noModel.status, 400);
  });

  test('LangChain JS: ChatOpenAI (chat and Responses API), OpenAIEmbeddings, ChatOllama, OllamaEmbeddings', async () => {
    const configuration = { baseURL: `${url}/v1` };
    const chat = new ChatOpenAI({
      model: 'm2',
      apiKey: 'unused',
      configuration,
      maxTokens: 3,
      maxRetries: 0,
    });
    const msg = await chat.invoke('hi');
    assert.equal(msg.usage_metadata?.output_tokens, 3);
    const viaResponses = new ChatOpenAI({
      model: 'm2',
      apiKey: 'unused',
      configuration,
      maxTokens: 3,
      maxRetries: 0,
      useResponsesApi: true,
    });
    const r2 = await viaResponses.invoke('hi');
    assert.equal(r2.usage_metadata?.output_tokens, 3);
    let streamed = '';
    for await (const c of await viaResponses.stream('hi')) streamed += c.text;
    assert.ok(streamed.length > 0);
    const emb = new OpenAIEmbeddings({ model: 'm1', apiKey: 'unused', configuration, maxRetries: 0 });
    assert.equal((await emb.embedQuery('hi')).length, 32);

    const ollamaChat = new ChatOllama({ baseUrl: url, model: 'm1', numPredict: 4 });
    const om = await ollamaChat.invoke('hi');
    assert.equal(om.usage_metadata?.output_tokens, 4);
    const oe = new OllamaEmbeddings({ baseUrl: url, model: 'm2' });
    assert.equal((await oe.embedDocuments(['a', 'b'])).length, 2);
  });

  test('Vercel AI SDK: createOpenAI()(model) (Responses API), chat, streaming, embed', async () => {
    const openai = createOpenAI({ baseURL: `${url}/v1`, apiKey: 'unused' });
    for (const model of ['m1', 'm2']) {
      const g = await generateText({ model: openai(model), prompt: 'hi', maxOutputTokens: 4, maxRetries: 0 });
      assert.ok(g.text.length > 0, model);
      assert.equal(g.usage.outputTokens, 4, model);
      const s = streamText({ model: openai(model), prompt: 'hi', maxOutputTokens: 6, maxRetries: 0 });
      let text = '';
      for await (const part of s.textStream) text += part;
      assert.ok(text.length > 0, model);
      assert.equal((await s.usage).outputTokens, 6, model);
      const c = await generateText({
        model: openai.chat(model),
        prompt: 'hi',
        maxOutputTokens: 2,
        maxRetries: 0,
      });
      assert.equal(c.usage.outputTokens, 2, model);
    }
    const e = await embed({ model: openai.embedding('m2'), value: 'hi', maxRetries: 0 });
    assert.equal(e.embedding.length, 32);
  });
});

// Issue #34: the default call of each client is non-streamed, and its first byte is the whole
// answer. Against a slow engine (`--speed 0.1`, run 40× faster) with a short stall limit, long
// answers must not be taken for a stuck backend (before the fix: 504 "backend ejected: stuck").
describe('default non-streamed calls against a slow engine', () => {
  const OUT = 400; // ~72 s at this speed, 1.8 s here
  const headers = { [OUTPUT_TOKENS_HEADER]: String(OUT) };
  let a: EngineServer;
  let b: EngineServer;
  let r: Router;
  let url: string;

  before(async () => {
    const slow = { profile: defaultProfile({ speed: 0.1 }), timeScale: 40 };
    a = await engine({ name: 'a', models: ['m1'], ...slow });
    b = await engine({ name: 'b', api: 'openai', models: ['m2'], ...slow });
    ({ router: r, url } = await router(
      settings(
        [backend('a', a.url, { models: ['m1'] }), backend('b', b.url, { api: 'openai', models: ['m2'] })],
        {
          timeouts: { connectMs: 1000, firstByteMs: 60_000, idleMs: 60_000 },
          health: stallHealth(200),
        },
      ),
    ));
    // Short streamed warm-ups on each: the usual time to a first byte is short.
    for (const model of ['m1', 'm2'])
      for (let i = 0; i < 3; i++) {
        const res = await post(`${url}/api/chat`, {
          model,
          messages: [{ role: 'user', content: `w${i}` }],
          options: { num_predict: 4 },
        });
        assert.equal(res.status, 200);
        await res.arrayBuffer();
      }
  });
  after(async () => {
    await r.close();
    await Promise.all([a.close(), b.close()]);
  });

  const healthy = (): void => {
    assert.equal(r.scheduler.backend('a')?.healthy, true, 'a never ejected');
    assert.equal(r.scheduler.backend('b')?.healthy, true, 'b never ejected');
  };

  test('openai JS: chat.completions.create without stream', async () => {
    const openai = new OpenAI({
      baseURL: `${url}/v1`,
      apiKey: 'unused',
      maxRetries: 0,
      defaultHeaders: headers,
    });
    for (const model of ['m1', 'm2']) {
      const c = await openai.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'write an essay' }],
        max_tokens: OUT,
      });
      assert.equal(c.usage?.completion_tokens, OUT, model);
    }
    healthy();
  });

  test('ollama JS: chat() without stream', async () => {
    const ollama = new Ollama({ host: url, headers });
    for (const model of ['m1', 'm2']) {
      const c = await ollama.chat({
        model,
        messages: [{ role: 'user', content: 'write an essay' }],
        options: { num_predict: OUT },
      });
      assert.equal(c.eval_count, OUT, model);
    }
    healthy();
  });

  test('LangChain JS: ChatOpenAI and ChatOllama invoke()', async () => {
    const chat = new ChatOpenAI({
      model: 'm2',
      apiKey: 'unused',
      configuration: { baseURL: `${url}/v1`, defaultHeaders: headers },
      maxTokens: OUT,
      maxRetries: 0,
    });
    assert.equal((await chat.invoke('write an essay')).usage_metadata?.output_tokens, OUT);
    const ollamaChat = new ChatOllama({ baseUrl: url, model: 'm1', numPredict: OUT, headers });
    assert.equal((await ollamaChat.invoke('write an essay')).usage_metadata?.output_tokens, OUT);
    healthy();
  });
});
