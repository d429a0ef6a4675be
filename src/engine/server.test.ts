import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { defaultProfile, startEngine, type EngineServer, type EngineServerOptions } from './server.js';
import { countTokens } from './tokens.js';
import { parseEngineMetrics, parseLlamaProps } from '../fleet/engine-metrics.js';

type Obj = Record<string, unknown>;

/** 50× faster than life: a 100-token answer takes ~40 ms. */
async function engine(t: TestContext, o: Partial<EngineServerOptions> = {}): Promise<EngineServer> {
  const e = await startEngine({
    port: 0,
    api: 'both',
    profile: defaultProfile(),
    timeScale: 50,
    seed: 3,
    ...o,
  });
  t.after(() => e.close());
  return e;
}

function post(
  e: EngineServer,
  path: string,
  body: unknown,
  outTokens?: number,
  signal?: AbortSignal,
): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (outTokens !== undefined) headers['x-llmlb-output-tokens'] = String(outTokens);
  return fetch(e.url + path, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

const json = async (r: Response): Promise<Obj> => (await r.json()) as Obj;
const ndjson = async (r: Response): Promise<Obj[]> =>
  (await r.text())
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Obj);
/** SSE data payloads, '[DONE]' included as a string. */
const sse = async (r: Response): Promise<(Obj | string)[]> =>
  (await r.text())
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6))
    .map((d) => (d === '[DONE]' ? d : (JSON.parse(d) as Obj)));

async function until(what: string, cond: () => Promise<boolean> | boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const metric = (text: string, name: string): number => {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`));
  assert.ok(line, `metric ${name} present`);
  return Number(line.split(' ').pop());
};

const PROMPT = 'Why is the sky blue? '.repeat(20); // 420 chars = 105 tokens

test('ollama /api/generate: non-stream counts, caps and durations', async (t) => {
  const e = await engine(t);
  const r = await post(e, '/api/generate', { model: 'llama3', prompt: PROMPT, stream: false }, 20);
  assert.equal(r.status, 200);
  const o = await json(r);
  assert.equal(o.model, 'llama3');
  assert.equal(o.done, true);
  assert.equal(o.done_reason, 'stop');
  assert.equal(o.eval_count, 20);
  assert.equal(o.prompt_eval_count, countTokens(PROMPT));
  assert.equal(countTokens(o.response as string), 20);
  for (const k of ['total_duration', 'prompt_eval_duration', 'eval_duration']) {
    assert.ok(Number.isInteger(o[k]) && (o[k] as number) > 0, k);
  }
  // Real-time ns: the prefill iteration by hand, divided by the time scale.
  const p = defaultProfile();
  const prefill = (p.baseStepS + p.perSeqS + p.perTokenS * 105 + p.prefillPerTokenS * 105) / 50;
  assert.ok(Math.abs((o.prompt_eval_duration as number) - prefill * 1e9) <= 1);

  const capped = await json(
    await post(
      e,
      '/api/generate',
      { model: 'llama3', prompt: 'hi', stream: false, options: { num_predict: 5 } },
      20,
    ),
  );
  assert.equal(capped.eval_count, 5);
  assert.equal(capped.done_reason, 'length');
  // 'name:latest' is the same model.
  const latest = await post(e, '/api/generate', { model: 'llama3:latest', prompt: 'hi', stream: false }, 1);
  assert.equal(latest.status, 200);
});

test('ollama /api/generate streams NDJSON by default', async (t) => {
  const e = await engine(t);
  const r = await post(e, '/api/generate', { model: 'llama3', prompt: PROMPT }, 30);
  assert.match(r.headers.get('content-type') ?? '', /ndjson/);
  const lines = await ndjson(r);
  const last = lines.pop()!;
  assert.ok(lines.length >= 1);
  for (const l of lines) {
    assert.equal(l.done, false);
    assert.equal(typeof l.created_at, 'string');
  }
  assert.equal(countTokens(lines.map((l) => l.response as string).join('')), 30);
  assert.equal(last.done, true);
  assert.equal(last.response, '');
  assert.equal(last.eval_count, 30);
  assert.equal(last.prompt_eval_count, 105);
});

test('ollama /api/chat: stream and non-stream', async (t) => {
  const e = await engine(t);
  const messages = [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Say something.' },
  ];
  const one = await json(await post(e, '/api/chat', { model: 'llama3', messages, stream: false }, 12));
  const msg = one.message as Obj;
  assert.equal(msg.role, 'assistant');
  assert.equal(countTokens(msg.content as string), 12);
  assert.equal(one.prompt_eval_count, countTokens('You are terse.\nSay something.'));
  const lines = await ndjson(await post(e, '/api/chat', { model: 'llama3', messages }, 12));
  const last = lines.pop()!;
  assert.equal(countTokens(lines.map((l) => (l.message as Obj).content as string).join('')), 12);
  assert.equal(last.done, true);
  assert.equal(last.eval_count, 12);
  // No messages: Ollama's "load" answer.
  const load = await json(await post(e, '/api/chat', { model: 'llama3' }));
  assert.equal(load.done_reason, 'load');
});

test('openai /v1/completions: non-stream and stream', async (t) => {
  const e = await engine(t);
  const o = await json(
    await post(e, '/v1/completions', { model: 'llama3', prompt: PROMPT, max_tokens: 8 }, 20),
  );
  assert.equal(o.object, 'text_completion');
  const c = (o.choices as Obj[])[0]!;
  assert.equal(c.finish_reason, 'length');
  assert.equal(countTokens(c.text as string), 8);
  // What its prefix cache held, as vLLM reports it (prompt_tokens_details.cached_tokens).
  assert.deepEqual(o.usage, {
    prompt_tokens: 105,
    completion_tokens: 8,
    total_tokens: 113,
    prompt_tokens_details: { cached_tokens: 0 },
  });

  const r = await post(e, '/v1/completions', { model: 'llama3', prompt: PROMPT, stream: true }, 15);
  assert.match(r.headers.get('content-type') ?? '', /event-stream/);
  const events = await sse(r);
  assert.equal(events.pop(), '[DONE]');
  const final = events.pop() as Obj;
  assert.equal((final.choices as Obj[])[0]!.finish_reason, 'stop');
  const text = events.map((ev) => ((ev as Obj).choices as Obj[])[0]!.text as string).join('');
  assert.equal(countTokens(text), 15);
  assert.ok(!events.some((ev) => (ev as Obj).usage), 'no usage chunk unless asked');
});

test('openai /v1/chat/completions: non-stream and stream with usage', async (t) => {
  const e = await engine(t);
  const messages = [{ role: 'user', content: PROMPT }];
  const o = await json(
    await post(e, '/v1/chat/completions', { model: 'llama3', messages, max_completion_tokens: 50 }, 9),
  );
  assert.equal(o.object, 'chat.completion');
  const c = (o.choices as Obj[])[0]!;
  assert.equal(c.finish_reason, 'stop');
  assert.equal((c.message as Obj).role, 'assistant');
  assert.equal(countTokens((c.message as Obj).content as string), 9);
  assert.deepEqual(o.usage, {
    prompt_tokens: 105,
    completion_tokens: 9,
    total_tokens: 114,
    prompt_tokens_details: { cached_tokens: 0 },
  });

  const events = await sse(
    await post(
      e,
      '/v1/chat/completions',
      { model: 'llama3', messages, stream: true, stream_options: { include_usage: true } },
      25,
    ),
  );
  assert.equal(events.pop(), '[DONE]');
  const usage = events.pop() as Obj;
  assert.deepEqual(usage.choices, []);
  assert.deepEqual(usage.usage, {
    prompt_tokens: 105,
    completion_tokens: 25,
    total_tokens: 130,
    // The same messages again: their six full 16-token blocks were in the prefix cache.
    prompt_tokens_details: { cached_tokens: 96 },
  });
  const final = events.pop() as Obj;
  assert.equal((final.choices as Obj[])[0]!.finish_reason, 'stop');
  const deltas = events.map((ev) => ((ev as Obj).choices as Obj[])[0]!.delta as Obj);
  assert.equal(deltas[0]!.role, 'assistant');
  assert.equal(countTokens(deltas.map((d) => d.content as string).join('')), 25);
  for (const ev of events) assert.equal((ev as Obj).object, 'chat.completion.chunk');
});

test('a configured context length shows in /v1/models, /v1/models/{id} and /api/show alike', async (t) => {
  const e = await engine(t, { models: ['llama3'], contextLength: 32768 });
  const list = await json(await fetch(`${e.url}/v1/models`));
  assert.equal((list.data as Obj[])[0]!.max_model_len, 32768);
  assert.equal((await json(await fetch(`${e.url}/v1/models/llama3`))).max_model_len, 32768);
  const show = await json(await fetch(`${e.url}/api/show`, { method: 'POST', body: '{"model":"llama3"}' }));
  assert.equal((show.model_info as Obj)['llama.context_length'], 32768);
});

test('model listings, version, health', async (t) => {
  const e = await engine(t, { models: ['llama3', 'qwen2.5'] });
  const tags = await json(await fetch(`${e.url}/api/tags`));
  assert.deepEqual(
    (tags.models as Obj[]).map((m) => m.name),
    ['llama3', 'qwen2.5'],
  );
  assert.equal(typeof (tags.models as Obj[])[0]!.digest, 'string');
  const models = await json(await fetch(`${e.url}/v1/models`));
  assert.equal(models.object, 'list');
  // vLLM's fields for the context length, 8192 unless configured.
  assert.deepEqual(
    (models.data as Obj[]).map((m) => [m.root, m.max_model_len]),
    [
      ['llama3', 8192],
      ['qwen2.5', 8192],
    ],
  );
  assert.deepEqual(
    (models.data as Obj[]).map((m) => [m.id, m.object]),
    [
      ['llama3', 'model'],
      ['qwen2.5', 'model'],
    ],
  );
  assert.equal(typeof (await json(await fetch(`${e.url}/api/version`))).version, 'string');
  const ps = await json(await fetch(`${e.url}/api/ps`));
  assert.equal((ps.models as Obj[]).length, 2);
  assert.deepEqual(ps.llmlb, { running: 0, waiting: 0, slots: 4, kvUsage: 0 });
  assert.equal((await fetch(`${e.url}/healthz`)).status, 200);
});

test('errors in the API format', async (t) => {
  const e = await engine(t);
  let r = await post(e, '/api/generate', '{not json');
  assert.equal(r.status, 400);
  assert.equal(typeof (await json(r)).error, 'string');
  r = await post(e, '/v1/chat/completions', '{not json');
  assert.equal(r.status, 400);
  const err = (await json(r)).error as Obj;
  assert.equal(typeof err.message, 'string');
  assert.equal(err.type, 'invalid_request_error');
  assert.equal(err.code, 'invalid_json');

  r = await post(e, '/api/generate', { prompt: 'x' });
  assert.equal(r.status, 400);
  assert.deepEqual(await json(r), { error: 'model is required' });
  r = await post(e, '/v1/completions', { prompt: 'x' });
  assert.equal(r.status, 400);
  assert.equal(((await json(r)).error as Obj).code, 'missing_model');

  r = await post(e, '/api/chat', { model: 'nope', messages: [] });
  assert.equal(r.status, 404);
  assert.deepEqual(await json(r), { error: "model 'nope' not found" });
  r = await post(e, '/v1/chat/completions', { model: 'nope', messages: [] });
  assert.equal(r.status, 404);
  assert.equal(((await json(r)).error as Obj).code, 'model_not_found');
  r = await post(e, '/v1/chat/completions', { model: 'llama3' });
  assert.equal(r.status, 400);

  r = await fetch(`${e.url}/nowhere`);
  assert.equal(r.status, 404);
  r = await fetch(`${e.url}/v1/nowhere`);
  assert.equal(r.status, 404);
  assert.equal(typeof ((await json(r)).error as Obj).message, 'string');
  r = await fetch(`${e.url}/api/generate`);
  assert.equal(r.status, 405);
  assert.equal(r.headers.get('allow'), 'POST');
  await r.body?.cancel();

  const openaiOnly = await engine(t, { api: 'openai' });
  r = await post(openaiOnly, '/api/generate', { model: 'llama3', prompt: 'x' });
  assert.equal(r.status, 404);
  await r.body?.cancel();
});

test('/metrics shows running and waiting while busy, then counters', async (t) => {
  const e = await engine(t, { profile: defaultProfile({ slots: 1 }) });
  const ctl = new AbortController();
  const pending = [1, 2, 3].map((i) =>
    post(e, '/api/generate', { model: 'llama3', prompt: `p${i}`, stream: false }, 100_000, ctl.signal).catch(
      () => undefined,
    ),
  );
  let text = '';
  await until('1 running, 2 waiting', async () => {
    text = await (await fetch(`${e.url}/metrics`)).text();
    return metric(text, 'vllm:num_requests_running') === 1 && metric(text, 'vllm:num_requests_waiting') === 2;
  });
  assert.match(text, /# TYPE vllm:num_requests_running gauge/);
  assert.match(text, /vllm:kv_cache_usage_perc\{model_name="llama3"\} 0\.\d+/);
  assert.ok(metric(text, 'vllm:generation_tokens_total') >= 0);
  ctl.abort();
  await Promise.all(pending);
  await until('all freed', () => e.stats().running === 0 && e.stats().waiting === 0);

  await post(e, '/api/generate', { model: 'llama3', prompt: PROMPT, stream: false }, 3).then(json);
  text = await (await fetch(`${e.url}/metrics`)).text();
  assert.equal(metric(text, 'vllm:request_success_total'), 1);
  assert.ok(metric(text, 'vllm:prompt_tokens_total') >= 105);
});

test('/metrics counts each request under its own model only; the fleet parser adds models up', async (t) => {
  const e = await engine(t, { models: ['a', 'b:latest'], profile: defaultProfile({ slots: 1 }) });
  const of = (text: string, name: string, model: string): number => {
    const line = text.split('\n').find((l) => l.startsWith(`${name}{model_name="${model}"}`));
    assert.ok(line, `${name} for ${model} present`);
    return Number(line.split(' ').pop());
  };
  const ctl = new AbortController();
  const pending = [
    ['a', 'p1'],
    ['a', 'p2'],
    ['b', 'p3'], // Ollama's short name for b:latest
  ].map(([model, prompt]) =>
    post(e, '/api/generate', { model, prompt, stream: false }, 100_000, ctl.signal).catch(() => undefined),
  );
  let text = '';
  await until('3 on the engine', async () => {
    text = await (await fetch(`${e.url}/metrics`)).text();
    return (
      of(text, 'vllm:num_requests_running', 'a') + of(text, 'vllm:num_requests_running', 'b:latest') === 1 &&
      of(text, 'vllm:num_requests_waiting', 'a') + of(text, 'vllm:num_requests_waiting', 'b:latest') === 2
    );
  });
  // FIFO on one slot: a's first runs; a's second and b's wait.
  assert.equal(of(text, 'vllm:num_requests_running', 'a'), 1);
  assert.equal(of(text, 'vllm:num_requests_waiting', 'a'), 1);
  assert.equal(of(text, 'vllm:num_requests_running', 'b:latest'), 0);
  assert.equal(of(text, 'vllm:num_requests_waiting', 'b:latest'), 1);
  const parsed = parseEngineMetrics(text, 0);
  assert.deepEqual([parsed?.running, parsed?.waiting], [1, 2]);
  assert.ok(parsed!.kvUsage > 0, 'the running sequence holds KV');
  ctl.abort();
  await Promise.all(pending);
  await until('all freed', () => e.stats().running === 0 && e.stats().waiting === 0);

  await post(e, '/v1/completions', { model: 'b:latest', prompt: PROMPT }, 3).then(json);
  text = await (await fetch(`${e.url}/metrics`)).text();
  assert.equal(of(text, 'vllm:request_success_total', 'b:latest'), 1);
  assert.equal(of(text, 'vllm:request_success_total', 'a'), 0);
  assert.equal(of(text, 'vllm:generation_tokens_total', 'b:latest'), 3);
  assert.equal(of(text, 'vllm:generation_tokens_total', 'a'), 0);
  assert.equal(of(text, 'vllm:num_requests_running', 'a') + of(text, 'vllm:num_requests_waiting', 'a'), 0);
});

test('prefix cache: a repeated prompt hits and prefills faster', async (t) => {
  const e = await engine(t);
  const long = 'A long shared system prompt. '.repeat(80);
  const first = await json(
    await post(e, '/api/generate', { model: 'llama3', prompt: long, stream: false }, 2),
  );
  const second = await json(
    await post(e, '/api/generate', { model: 'llama3', prompt: long, stream: false }, 2),
  );
  assert.ok((second.prompt_eval_duration as number) < (first.prompt_eval_duration as number) / 2);
  const text = await (await fetch(`${e.url}/metrics`)).text();
  assert.ok(metric(text, 'vllm:prefix_cache_hits_total') > 0);
  assert.ok(metric(text, 'vllm:prefix_cache_queries_total') >= metric(text, 'vllm:prefix_cache_hits_total'));
});

test('client abort frees the slot', async (t) => {
  const e = await engine(t, { profile: defaultProfile({ slots: 1 }) });
  const ctl = new AbortController();
  const r = await post(e, '/api/generate', { model: 'llama3', prompt: 'long one' }, 1_000_000, ctl.signal);
  const reader = r.body!.getReader();
  await reader.read(); // streaming has begun: the sequence holds the only slot
  assert.equal(e.stats().running, 1);
  ctl.abort();
  await until('slot freed', () => e.stats().running === 0);
  const next = await json(
    await post(e, '/api/generate', { model: 'llama3', prompt: 'next', stream: false }, 3),
  );
  assert.equal(next.eval_count, 3);
});

test('output length without a hint: seeded draw, same seed same lengths', async (t) => {
  const lengths = async (seed: number): Promise<number[]> => {
    const e = await engine(t, { seed, defaultOutputTokens: { mean: 10 } });
    const out: number[] = [];
    for (let i = 0; i < 5; i++) {
      const o = await json(await post(e, '/api/generate', { model: 'llama3', prompt: 'q', stream: false }));
      out.push(o.eval_count as number);
    }
    return out;
  };
  const a = await lengths(42);
  assert.deepEqual(await lengths(42), a);
  for (const n of a) assert.ok(Number.isInteger(n) && n >= 1);
});

test('faults: failRate, hang, runtime setting via /_emulator/faults', async (t) => {
  const e = await engine(t, { faults: { failRate: 1 } });
  let r = await post(e, '/api/generate', { model: 'llama3', prompt: 'x', stream: false }, 2);
  assert.equal(r.status, 500);
  assert.equal(typeof (await json(r)).error, 'string');
  r = await post(e, '/v1/completions', { model: 'llama3', prompt: 'x' }, 2);
  assert.equal(r.status, 500);
  assert.equal(((await json(r)).error as Obj).type, 'server_error');

  // failRate also fails what health probes read, so a broken box looks down to them.
  r = await fetch(`${e.url}/api/version`);
  assert.equal(r.status, 500);
  await r.body?.cancel();
  r = await fetch(`${e.url}/v1/models`);
  assert.equal(r.status, 500);
  await r.body?.cancel();
  assert.equal((await fetch(`${e.url}/metrics`)).status, 200, 'metrics stay readable');

  r = await post(e, '/_emulator/faults', { hang: true });
  assert.equal(r.status, 200);
  await r.body?.cancel();
  await assert.rejects(
    post(e, '/api/generate', { model: 'llama3', prompt: 'x', stream: false }, 2, AbortSignal.timeout(150)),
  );
  assert.equal(e.stats().running, 0);

  r = await post(e, '/_emulator/faults', { failRate: 7 });
  assert.equal(r.status, 400);
  await r.body?.cancel();
  e.setFaults({});
  r = await post(e, '/api/generate', { model: 'llama3', prompt: 'x', stream: false }, 2);
  assert.equal(r.status, 200);
  const stats = await json(await fetch(`${e.url}/_emulator/stats`));
  assert.equal(stats.requests, 4, 'generation requests only');
  assert.equal(stats.completed, 1);
  await r.body?.cancel();
});

test('faults: a stream dies after N chunks and its slot is freed', async (t) => {
  const e = await engine(t, { faults: { dieMidStreamAfterChunks: 2 }, timeScale: 5 });
  const r = await post(e, '/api/generate', { model: 'llama3', prompt: 'x' }, 500);
  await assert.rejects(r.text());
  await until('slot freed', () => e.stats().running === 0);
  assert.equal(e.stats().completed, 0);
});

test('faults: exitAfter crashes the server after N requests', async (t) => {
  const e = await engine(t, { faults: { exitAfter: 1 } });
  const ok = await post(e, '/api/generate', { model: 'llama3', prompt: 'x', stream: false }, 2);
  assert.equal(ok.status, 200);
  await ok.body?.cancel();
  await assert.rejects(post(e, '/api/generate', { model: 'llama3', prompt: 'x', stream: false }, 2));
  await assert.rejects(fetch(`${e.url}/healthz`));
});

test("cacheMode slots serves llama.cpp's /props (slots, each slot's context); block caches do not", async (t) => {
  const slots = await engine(t, {
    profile: defaultProfile({ slots: 2, kvCapacityTokens: 8000, cacheMode: 'slots' }),
  });
  const props = await json(await fetch(`${slots.url}/props`));
  assert.deepEqual(parseLlamaProps(props), { tokens: 8000, slots: 2 });
  const blocks = await engine(t);
  assert.equal((await fetch(`${blocks.url}/props`)).status, 404);
  // Slots without a cache (prefixCacheBlocks 0) keep nothing: no /props, as the simulator reports none.
  const none = await engine(t, {
    profile: defaultProfile({ slots: 2, kvCapacityTokens: 8000, cacheMode: 'slots', prefixCacheBlocks: 0 }),
  });
  assert.equal((await fetch(`${none.url}/props`)).status, 404);
});
