// LoRA adapters live (issue #35): emulated vLLM-style engines serving adapters on a base model,
// discovered by the router from /v1/models (parent) and vllm:lora_requests_info, and routed to
// where their adapter is loaded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backend, engine, fastProfile, post, router, settings, waitFor } from './helpers.js';

const profile = fastProfile({ lora: { maxLora: 1, swapS: 0.05, adapters: ['sql', 'poem'] } });
const chat = (model: string) => ({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 });

test('an engine lists its adapters with parent and root, and reports vllm:lora_requests_info', async (t) => {
  const e = await engine({ api: 'openai', models: ['base'], profile });
  t.after(() => e.close());
  const list = (await (await fetch(`${e.url}/v1/models`)).json()) as { data: Record<string, unknown>[] };
  const byId = new Map(list.data.map((m) => [m.id, m]));
  assert.equal(byId.get('base')?.parent, undefined);
  assert.equal(byId.get('sql')?.parent, 'base');
  assert.equal(byId.get('sql')?.root, '/adapters/sql');
  const r = await post(`${e.url}/v1/chat/completions`, chat('sql'));
  assert.equal(r.status, 200);
  await r.text();
  const page = await (await fetch(`${e.url}/metrics`)).text();
  assert.match(
    page,
    /vllm:lora_requests_info\{max_lora="1",running_lora_adapters="",waiting_lora_adapters=""\} \d/,
  );
  assert.equal(e.stats().loraLoads, 1);
});

test('the router discovers adapters and keeps an adapter where it is loaded', async (t) => {
  const engines = await Promise.all([0, 1].map(() => engine({ api: 'openai', models: ['base'], profile })));
  t.after(() => Promise.all(engines.map((e) => e.close())));
  const { router: r, url } = await router(
    settings(
      engines.map((e, i) => backend(`e${i}`, e.url, { api: 'openai', models: undefined })),
      { policy: { name: 'estimated-wait', params: {} } },
    ),
  );
  t.after(() => r.close());
  await waitFor(
    () => ['e0', 'e1'].every((n) => r.scheduler.backend(n)?.adapters?.has('sql') === true),
    5000,
    'adapters discovered',
  );
  await waitFor(
    () => ['e0', 'e1'].every((n) => r.scheduler.backend(n)?.metrics?.lora?.maxLora === 1),
    5000,
    'lora metrics scraped',
  );
  // One after another: the first loads `sql` somewhere; the rest follow it there.
  for (let i = 0; i < 6; i++) {
    const res = await post(`${url}/v1/chat/completions`, chat('sql'));
    assert.equal(res.status, 200);
    const body = (await res.json()) as { model: string };
    assert.equal(body.model, 'sql');
  }
  const loads = engines.map((e) => e.stats().loraLoads);
  const served = engines.map((e) => e.stats().completed);
  assert.deepEqual(loads.toSorted(), [0, 1], `one load in all (${loads.join(', ')})`);
  assert.deepEqual(served.toSorted(), [0, 6]);
  // A base-model request still goes anywhere.
  const base = await post(`${url}/v1/chat/completions`, chat('base'));
  assert.equal(base.status, 200);
  await base.text();
});

test('with configured models, adapters are learned from vllm:lora_requests_info', async (t) => {
  const e = await engine({ api: 'openai', models: ['base'], profile });
  t.after(() => e.close());
  const { router: r, url } = await router(
    settings([backend('e0', e.url, { api: 'openai', models: ['base', 'sql', 'poem'] })], {
      policy: { name: 'estimated-wait', params: {} },
    }),
  );
  t.after(() => r.close());
  assert.equal(r.scheduler.backend('e0')?.adapters, undefined, 'not known before the engine says');
  // A long answer keeps `sql` running while the router scrapes the gauge.
  const res = post(`${url}/v1/chat/completions`, { ...chat('sql'), max_tokens: 400 });
  await waitFor(() => r.scheduler.backend('e0')?.adapters?.has('sql') === true, 5000, 'sql learned');
  assert.equal(r.scheduler.backend('e0')?.adapters?.has('poem'), false);
  assert.equal((await res).status, 200);
});
