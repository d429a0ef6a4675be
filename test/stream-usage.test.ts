/**
 * Issue #34 item 3: OpenAI-API streams whose client did not ask for usage (the openai SDKs' and
 * aiperf's default) are counted: the router asks the backend for usage and drops the extra event.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { EngineServer } from '../src/engine/server.js';
import type { Router } from '../src/proxy/router.js';
import { backend, engine, fastProfile, post, router, settings } from './helpers.js';

/** An SSE body with the per-response parts (id, created) normalised, for byte comparison. */
const normalised = (s: string): string =>
  s.replace(/"id":"[^"]*"/g, '"id":"X"').replace(/"created":\d+/g, '"created":0');

async function engineTokens(e: EngineServer): Promise<number> {
  const text = await (await fetch(`${e.url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith('vllm:generation_tokens_total')) sum += Number(line.split(' ').pop());
  return sum;
}

describe('streams without include_usage', () => {
  const engines: EngineServer[] = [];
  let r: Router;
  let url: string;

  before(async () => {
    // decode-paced engines, so tokens arrive over several steps and events split across chunks
    for (let i = 0; i < 3; i++)
      engines.push(
        await engine({ api: 'openai', models: ['m1'], profile: fastProfile({ baseStepS: 0.001 }) }),
      );
    ({ router: r, url } = await router(
      settings(engines.map((e, i) => backend(`e${i}`, e.url, { api: 'openai' }))),
    ));
  });
  after(async () => {
    await r.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('the dashboard counts every token the engines generated (openai SDK default streams)', async () => {
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none' });
    const before = (await Promise.all(engines.map(engineTokens))).reduce((a, b) => a + b, 0);
    const t0 = Date.now();
    let clientSawUsage = 0;
    let clientEvents = 0;
    const one = async (i: number): Promise<void> => {
      const s = await client.chat.completions.create({
        model: 'm1',
        messages: [{ role: 'user', content: `question ${i}` }],
        max_tokens: 5 + ((i * 7) % 40),
        stream: true,
      });
      for await (const c of s) {
        clientEvents++;
        if (c.usage) clientSawUsage++;
        assert.ok(c.choices.length > 0, 'no usage-only chunk reaches a client that did not ask');
      }
    };
    for (let i = 0; i < 120; i += 8) await Promise.all(Array.from({ length: 8 }, (_, k) => one(i + k)));
    const generated = (await Promise.all(engines.map(engineTokens))).reduce((a, b) => a + b, 0) - before;
    assert.equal(clientSawUsage, 0);
    assert.ok(clientEvents > 120);
    // The dashboard's fleet series holds complete seconds: wait for the last one to close.
    await new Promise((res) => setTimeout(res, 1100));
    const counted = r.stats
      .snapshot(Date.now())
      .fleet.filter((s) => s.t >= Math.floor(t0 / 1000) * 1000)
      .reduce((a, s) => a + s.tokens, 0);
    assert.ok(generated > 0);
    assert.equal(counted, generated, `router counted ${counted} tokens, engines generated ${generated}`);
  });

  test('a client gets the bytes a direct connection gives it, and its usage when it asks', async () => {
    const [a, b] = [
      await engine({ api: 'openai', models: ['m1'], seed: 7 }),
      await engine({ api: 'openai', models: ['m1'], seed: 7 }),
    ];
    const via = await router(settings([backend('b', b.url, { api: 'openai' })]));
    try {
      const req = {
        model: 'm1',
        messages: [{ role: 'user', content: 'same question' }],
        max_tokens: 12,
        stream: true,
      };
      const direct = await (await post(`${a.url}/v1/chat/completions`, req)).text();
      const routed = await (await post(`${via.url}/v1/chat/completions`, req)).text();
      assert.equal(normalised(routed), normalised(direct));
      assert.ok(!routed.includes('"usage"'));
      const asked = { ...req, stream_options: { include_usage: true } };
      const withUsage = await (await post(`${via.url}/v1/chat/completions`, asked)).text();
      assert.match(withUsage, /"choices":\[\],"usage":\{"prompt_tokens":\d+,"completion_tokens":12/);
    } finally {
      await via.router.close();
      await Promise.all([a.close(), b.close()]);
    }
  });

  test('a backend with streamUsage: false is sent the body as it came; its events are counted', async () => {
    const e = await engine({ api: 'openai', models: ['m1'] });
    const via = await router(settings([backend('e', e.url, { api: 'openai', streamUsage: false })]));
    try {
      const t0 = Date.now();
      const body = await (
        await post(`${via.url}/v1/chat/completions`, {
          model: 'm1',
          messages: [{ role: 'user', content: 'count me' }],
          max_tokens: 9,
          stream: true,
        })
      ).text();
      assert.ok(!body.includes('"usage"'));
      await new Promise((res) => setTimeout(res, 1100));
      const tokens = via.router.stats
        .snapshot(Date.now())
        .fleet.filter((s) => s.t >= Math.floor(t0 / 1000) * 1000)
        .reduce((a, s) => a + s.tokens, 0);
      assert.equal(tokens, 9);
    } finally {
      await via.router.close();
      await e.close();
    }
  });
});
