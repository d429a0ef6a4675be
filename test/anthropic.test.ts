// Anthropic Messages (POST /v1/messages, /v1/messages/count_tokens) through the router with the
// official @anthropic-ai/sdk. Three twin emulated engines (same name and seed, so their n-th
// generation writes the same text): `nA` serves /v1/messages natively behind router A, `nD` is
// the same engine asked directly, `tB` has no /v1/messages and sits behind router B, which
// translates to chat completions. Every step sends the same request to all three, so each
// engine's n-th answer is comparable: A's bytes must be nD's (pass-through), B's must say the same
// (translation). A scripted chat-completions server (`tools`, real HTTP) answers with tool calls,
// which the emulated engine never makes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import { OUTPUT_TOKENS_HEADER, type EngineServer } from '../src/engine/server.js';
import type { Router } from '../src/proxy/router.js';
import { responseUsage, TailBuffer } from '../src/proxy/usage.js';
import { backend, engine, post, router, settings, waitFor } from './helpers.js';

type Obj = Record<string, unknown>;

/** A chat-completions server for model `tools`: it calls get_weather until it sees a tool result. */
async function toolServer(): Promise<{ url: string; seen: Obj[]; probes: string[]; close(): Promise<void> }> {
  const seen: Obj[] = [];
  /** POSTs to routes it lacks: `path probe-header` (the router's capability probes). */
  const probes: string[] = [];
  const usage = { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'GET' && req.url === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: [{ id: 'tools', object: 'model' }] }));
        return;
      }
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        if (req.method === 'POST') probes.push(`${req.url} ${String(req.headers['x-llmlb-probe'])}`);
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'no route', type: 'not_found' } }));
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Obj;
      seen.push(body);
      if (body.max_tokens === 9999) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'max_tokens is too large', type: 'BadRequestError' } }));
        return;
      }
      const msgs = body.messages as Obj[];
      const call = Array.isArray(body.tools) && msgs[msgs.length - 1]?.role !== 'tool';
      const args = '{"city": "Paris", "unit": "c"}';
      if (body.stream !== true) {
        const message = call
          ? {
              role: 'assistant',
              content: null,
              tool_calls: [
                { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: args } },
              ],
            }
          : { role: 'assistant', content: 'Sunny, 21 °C.' };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            id: 'chatcmpl-t1',
            object: 'chat.completion',
            model: 'tools',
            choices: [{ index: 0, message, finish_reason: call ? 'tool_calls' : 'stop' }],
            usage,
          }),
        );
        return;
      }
      const ev = (o: object): string =>
        `data: ${JSON.stringify({ id: 'chatcmpl-t2', object: 'chat.completion.chunk', model: 'tools', ...o })}\n\n`;
      const parts = call
        ? [
            ev({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }),
            ev({
              choices: [
                {
                  index: 0,
                  delta: {
                    tool_calls: [
                      {
                        index: 0,
                        id: 'call_2',
                        type: 'function',
                        function: { name: 'get_weather', arguments: args.slice(0, 9) },
                      },
                    ],
                  },
                  finish_reason: null,
                },
              ],
            }),
            ev({
              choices: [
                {
                  index: 0,
                  delta: { tool_calls: [{ index: 0, function: { arguments: args.slice(9) } }] },
                  finish_reason: null,
                },
              ],
            }),
            ev({ choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] }),
          ]
        : [
            ev({
              choices: [{ index: 0, delta: { role: 'assistant', content: 'Sunny, ' }, finish_reason: null }],
            }),
            ev({ choices: [{ index: 0, delta: { content: '21 °C.' }, finish_reason: null }] }),
            ev({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }),
          ];
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // Split one event across writes: the router's decoder must reassemble it.
      const all = parts.join('') + ev({ choices: [], usage }) + 'data: [DONE]\n\n';
      res.write(all.slice(0, 50));
      res.end(all.slice(50));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    probes,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const WEATHER: Anthropic.Tool = {
  name: 'get_weather',
  description: 'Weather in a city',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string' }, unit: { type: 'string' } },
    required: ['city'],
  },
};

describe('Anthropic Messages through the router (native and translated)', () => {
  let nA: EngineServer;
  let nD: EngineServer;
  let tB: EngineServer;
  let tools: Awaited<ReturnType<typeof toolServer>>;
  let A: Router;
  let B: Router;
  let clientA: Anthropic;
  let clientB: Anthropic;
  let urlA: string;
  let urlB: string;

  before(async () => {
    const twin = { name: 'twin', api: 'openai' as const, models: ['m1'], seed: 7 };
    nA = await engine({ ...twin, messages: true });
    nD = await engine({ ...twin, messages: true });
    tB = await engine(twin);
    tools = await toolServer();
    ({ router: A, url: urlA } = await router(settings([backend('a', nA.url, { api: 'openai' })])));
    ({ router: B, url: urlB } = await router(
      settings([
        backend('b', tB.url, { api: 'openai' }),
        backend('t', tools.url, { api: 'openai', models: ['tools'] }),
      ]),
    ));
    await waitFor(
      () =>
        A.fleet.get('a')?.messagesApi === true &&
        B.fleet.get('b')?.messagesApi === false &&
        B.fleet.get('t')?.messagesApi === false,
      3000,
      '/v1/messages capability learned',
    );
    clientA = new Anthropic({ baseURL: urlA, apiKey: 'k', maxRetries: 0 });
    clientB = new Anthropic({ baseURL: urlB, apiKey: 'k', maxRetries: 0 });
  });
  after(async () => {
    await Promise.all([A.close(), B.close()]);
    await Promise.all([nA.close(), nD.close(), tB.close(), tools.close()]);
  });

  const headers = { [OUTPUT_TOKENS_HEADER]: '6', 'anthropic-version': '2023-06-01' };
  const direct = async (body: object): Promise<string> => {
    const res = await post(`${nD.url}/v1/messages`, body, headers);
    assert.equal(res.status, 200);
    return res.text();
  };

  test('messages.create: native answers pass byte for byte; translated ones say the same', async () => {
    const params: Anthropic.MessageCreateParamsNonStreaming = {
      model: 'm1',
      max_tokens: 32,
      system: 'You are terse.',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Name a colour.' }] }],
    };
    const rawA = await (await clientA.messages.create(params, { headers }).asResponse()).text();
    const rawD = await direct(params);
    const viaB = await clientB.messages.create(params, { headers });
    assert.equal(rawA, rawD, 'pass-through is byte-identical');
    const native = JSON.parse(rawA) as Anthropic.Message;
    assert.equal(native.type, 'message');
    assert.equal(native.stop_reason, 'end_turn');
    assert.equal(native.usage.output_tokens, 6);
    assert.equal(native.usage.input_tokens, Math.ceil('You are terse.\nName a colour.'.length / 4));
    assert.deepEqual(viaB, native, 'translated: same content, stop reason and usage');
  });

  test('messages.stream: named events; native bytes pass as sent, translated events match them', async () => {
    const params: Anthropic.MessageCreateParamsStreaming = {
      model: 'm1',
      max_tokens: 4,
      messages: [{ role: 'user', content: 'Count.' }],
      stream: true,
    };
    const rawA = await (await clientA.messages.create(params, { headers }).asResponse()).text();
    const rawD = await direct(params);
    const rawB = await (await clientB.messages.create(params, { headers }).asResponse()).text();
    assert.equal(rawA, rawD, 'pass-through is byte-identical');
    const types = [...rawA.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
    assert.deepEqual(types.slice(0, 3), ['message_start', 'ping', 'content_block_start']);
    assert.deepEqual(types.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
    assert.ok(types.includes('content_block_delta'));
    // The translation writes the events the native engine writes, for the same answer.
    assert.equal(rawB, rawA, 'translated stream = native stream');
    // The router read the native stream's usage: message_start's input, message_delta's output.
    const tail = new TailBuffer(4096);
    tail.push(Buffer.from(rawA));
    assert.deepEqual(responseUsage(tail, 'anthropic', true, Buffer.from(rawA)), {
      promptTokens: Math.ceil('Count.'.length / 4),
      completionTokens: 4,
    });

    // The SDK's stream helper assembles the same message on both paths.
    const sA = clientA.messages.stream(params, { headers });
    const eventsA: string[] = [];
    for await (const ev of sA) eventsA.push(ev.type);
    await direct(params); // keep the twins in step
    const sB = clientB.messages.stream(params, { headers });
    const eventsB: string[] = [];
    for await (const ev of sB) eventsB.push(ev.type);
    const [finalA, finalB] = [await sA.finalMessage(), await sB.finalMessage()];
    assert.deepEqual(eventsB, eventsA);
    assert.deepEqual(finalB, finalA);
    assert.equal(finalB.stop_reason, 'max_tokens');
    assert.deepEqual(finalB.usage, { input_tokens: Math.ceil('Count.'.length / 4), output_tokens: 4 });
    assert.ok(finalB.content.length === 1 && finalB.content[0]!.type === 'text');
  });

  test('which path each router took: A forwards the Anthropic body, B sends a chat completion', async () => {
    // The engines count the prompt they were sent: a native one counts the tool_use input too,
    // a chat completion carries it as tool_calls (not prompt text).
    const params: Anthropic.MessageCreateParamsNonStreaming = {
      model: 'm1',
      max_tokens: 8,
      messages: [
        { role: 'user', content: 'Weather?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'w', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'sunny' }] },
      ],
    };
    const a = await clientA.messages.create(params, { headers });
    await direct(params);
    const b = await clientB.messages.create(params, { headers });
    assert.equal(a.usage.input_tokens, Math.ceil('Weather?\n{"city":"Paris"}\nsunny'.length / 4));
    assert.equal(b.usage.input_tokens, Math.ceil('Weather?\n\nsunny'.length / 4));
    assert.deepEqual(b.content, a.content, 'the same answer text either way');
  });

  test('the capability probe is marked as one (x-llmlb-probe), so engines and proxies can tell it from generation', () => {
    assert.ok(tools.probes.includes('/v1/messages route'), `probes seen: ${tools.probes.join(', ')}`);
    assert.ok(
      tools.probes.every((p) => p.endsWith(' route')),
      `every probe POST marked: ${tools.probes.join(', ')}`,
    );
  });

  test('count_tokens: forwarded where served, the router’s estimate (said so) where not', async () => {
    const params: Anthropic.MessageCountTokensParams = {
      model: 'm1',
      system: 'Be brief.',
      messages: [{ role: 'user', content: 'How many tokens is this?' }],
      tools: [WEATHER],
    };
    const a = await clientA.messages.countTokens(params).withResponse();
    const b = await clientB.messages.countTokens(params).withResponse();
    assert.ok(a.data.input_tokens > 0);
    assert.equal(b.data.input_tokens, a.data.input_tokens);
    assert.equal(a.response.headers.get('x-llmlb-token-count'), null);
    assert.match(b.response.headers.get('x-llmlb-token-count') ?? '', /estimated/);
  });

  test('tools through the translation: tool_use out, tool_result back, whole and streamed', async () => {
    const ask: Anthropic.MessageCreateParamsNonStreaming = {
      model: 'tools',
      max_tokens: 64,
      tools: [WEATHER],
      tool_choice: { type: 'auto' },
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    };
    const first = await clientB.messages.create(ask);
    assert.equal(first.stop_reason, 'tool_use');
    assert.deepEqual(first.content, [
      { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris', unit: 'c' } },
    ]);
    assert.deepEqual(first.usage, { input_tokens: 11, output_tokens: 5 });
    const sent = tools.seen[tools.seen.length - 1]!;
    assert.deepEqual(sent.tools, [
      {
        type: 'function',
        function: { name: 'get_weather', description: 'Weather in a city', parameters: WEATHER.input_schema },
      },
    ]);
    assert.equal(sent.tool_choice, 'auto');

    const second = await clientB.messages.create({
      ...ask,
      messages: [
        ...ask.messages,
        { role: 'assistant', content: first.content },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'call_1', content: [{ type: 'text', text: '21 C' }] },
          ],
        },
      ],
    });
    assert.deepEqual(second.content, [{ type: 'text', text: 'Sunny, 21 °C.' }]);
    assert.equal(second.stop_reason, 'end_turn');
    const back = tools.seen[tools.seen.length - 1]!.messages as Obj[];
    assert.deepEqual(back.slice(1), [
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'call_1',
            type: 'function',
            function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"c"}' },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '21 C' },
    ]);

    const stream = clientB.messages.stream({ ...ask, stream: true });
    const deltas: string[] = [];
    stream.on('inputJson', (partial) => deltas.push(partial));
    const final = await stream.finalMessage();
    assert.equal(final.stop_reason, 'tool_use');
    assert.deepEqual(final.content, [
      { type: 'tool_use', id: 'call_2', name: 'get_weather', input: { city: 'Paris', unit: 'c' } },
    ]);
    assert.deepEqual(final.usage.output_tokens, 5);
    assert.equal(final.usage.input_tokens, 11);
    assert.ok(deltas.length > 0, 'input_json_delta events');
    const streamed = tools.seen[tools.seen.length - 1]!;
    assert.deepEqual(streamed.stream_options, { include_usage: true });
  });

  test('bad input is a 400 in Anthropic’s error shape; upstream errors are converted', async () => {
    for (const [c, url] of [
      [clientA, urlA],
      [clientB, urlB],
    ] as const) {
      await assert.rejects(
        // @ts-expect-error max_tokens is required
        c.messages.create({ model: 'm1', messages: [{ role: 'user', content: 'x' }] }),
        (err: unknown) =>
          err instanceof Anthropic.BadRequestError &&
          (err.error as { error?: { type?: string } }).error?.type === 'invalid_request_error',
      );
      const res = await post(`${url}/v1/messages`, '{"model":"m1","messages":');
      assert.equal(res.status, 400);
      const body = (await res.json()) as Obj;
      assert.equal(body.type, 'error');
      assert.equal((body.error as Obj).type, 'invalid_request_error');
      assert.match((body.error as Obj).message as string, /invalid JSON/);
      const missing = await post(`${url}/v1/messages`, {
        model: 'nope',
        max_tokens: 1,
        messages: [{ role: 'user', content: 'x' }],
      });
      assert.equal(missing.status, 404);
      assert.equal(((await missing.json()) as { error: Obj }).error.type, 'not_found_error');
      const get = await fetch(`${url}/v1/messages`);
      assert.equal(get.status, 405);
      assert.equal(((await get.json()) as Obj).type, 'error');
    }
    // A chat backend's own 400 reaches the Anthropic client in Anthropic's shape.
    await assert.rejects(
      clientB.messages.create({
        model: 'tools',
        max_tokens: 9999,
        messages: [{ role: 'user', content: 'x' }],
      }),
      (err: unknown) =>
        err instanceof Anthropic.BadRequestError &&
        (err.error as { type?: string }).type === 'error' &&
        /too large/.test(err.message),
    );
  });

  test('usage reaches the router’s stats on both paths (tokens counted, none uncounted)', () => {
    for (const [r, name] of [
      [A, 'a'],
      [B, 'b'],
    ] as const) {
      const s = r.stats.backend(name, Date.now() + 1000)!;
      assert.ok(s.tokensPerS > 0, `${name}: tokens counted`);
      assert.equal(s.uncountedPerS, 0, `${name}: none uncounted`);
    }
  });
});
