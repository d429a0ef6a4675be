// Native /v1/responses pass-through counts tokens: the Responses API names them `input_tokens` /
// `output_tokens` under the body's `usage` (non-streamed) or the closing `response.completed`
// event's `response.usage` (streamed), not OpenAI chat's `prompt_tokens` / `completion_tokens`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OUTPUT_TOKENS_HEADER } from '../src/engine/server.js';
import { responseUsage, TailBuffer } from '../src/proxy/usage.js';
import { backend, engine, post, router, settings, waitFor } from './helpers.js';

test('native /v1/responses: usage read from body and stream, counted in the router stats', async (t) => {
  const e = await engine({ name: 'a', api: 'openai', models: ['m1'] });
  const { router: r, url } = await router(settings([backend('a', e.url, { api: 'openai' })]));
  t.after(async () => {
    await r.close();
    await e.close();
  });
  await waitFor(() => r.fleet.get('a')?.responsesApi === true, 3000, 'responses capability learned');
  const input = 'Name three colours, tersely.';
  const send = async (base: string, stream: boolean, out: number): Promise<string> => {
    const res = await post(
      `${base}/v1/responses`,
      { model: 'm1', input, stream, max_output_tokens: 2000 },
      { [OUTPUT_TOKENS_HEADER]: String(out) },
    );
    assert.equal(res.status, 200);
    return res.text();
  };

  // The engine's own bytes, read as the router reads a forwarded answer's tail.
  const usageOf = (raw: string, stream: boolean) => {
    const tail = new TailBuffer(stream ? 4096 : 1 << 20);
    tail.push(Buffer.from(raw));
    return responseUsage(tail, 'openai-responses', stream);
  };
  const whole = JSON.parse(await send(e.url, false, 7)) as { usage: { input_tokens: number } };
  const prompt = whole.usage.input_tokens;
  assert.ok(prompt > 0);
  assert.deepEqual(usageOf(JSON.stringify(whole), false), {
    promptTokens: prompt,
    completionTokens: 7,
    cachedTokens: 0,
  });
  const streamed = await send(e.url, true, 5);
  assert.match(streamed, /event: response\.completed\n/);
  assert.match(streamed, /"usage":null/, 'the opening events carry a null usage');
  assert.deepEqual(usageOf(streamed, true), { promptTokens: prompt, completionTokens: 5, cachedTokens: 0 });
  // A long answer: the closing event alone is over the 4 KB a stream's tail keeps in front of it.
  const long = await send(e.url, true, 600);
  assert.ok(long.length > 8192);
  assert.equal(usageOf(long, true).completionTokens, 600);

  // Through the router (forwarded as it came): every answer's tokens counted, none uncounted.
  const before = Date.now();
  await send(url, false, 7);
  await send(url, true, 5);
  await send(url, true, 600);
  const stats = r.stats.backend('a', Date.now() + 1000)!;
  assert.equal(stats.uncountedPerS, 0, 'no generation left uncounted');
  const tokens = r.stats
    .fleetSeries(Date.now() + 1000)
    .filter((s) => s.t >= Math.floor(before / 1000) * 1000)
    .reduce((n, s) => n + s.tokens, 0);
  assert.equal(tokens, 7 + 5 + 600);
});
