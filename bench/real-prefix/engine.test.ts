import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { parseEngineMetrics, parseLlamaProps } from '../../src/fleet/engine-metrics.js';
import { isReadyMessage } from '../common.js';
import { TINY_SHAPE, writeTinyLlamaGguf } from './gguf.js';

const ENGINE = fileURLToPath(new URL('./engine.ts', import.meta.url));

async function post(url: string, body: unknown): Promise<{ status: number; text: string }> {
  const r = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.statusCode, text: await r.body.text() };
}

/** An engine process on a tiny random-weight GGUF (2 slots × 512 tokens, plus `args`): `run` gets its URL; it is stopped after. */
async function withEngine(args: string[], run: (base: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'llmlb-engine-'));
  const model = join(dir, 'tiny.gguf');
  await writeTinyLlamaGguf(model, TINY_SHAPE);
  const proc = fork(ENGINE, [model, '--slots', '2', '--ctx', '512', ...args], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  try {
    const base = await new Promise<string>((resolve, reject) => {
      proc.on('message', (m) => {
        if (isReadyMessage(m)) resolve(m.urls[0]!);
      });
      proc.on('exit', (code) => reject(new Error(`engine exited ${code}`)));
    });
    await run(base);
  } finally {
    proc.kill('SIGTERM');
    await rm(dir, { recursive: true, force: true });
  }
}

test('the engine reuses a slot’s cached prefix, streams usage last, and refuses bad input with 400', async () => {
  await withEngine([], async (base) => {
    const doc = 'The shared document. '.repeat(10);
    const first = await post(`${base}/v1/completions`, { model: 'm', prompt: doc + 'Q1?', max_tokens: 3 });
    assert.equal(first.status, 200);
    const u1 = (JSON.parse(first.text) as { usage: Record<string, unknown> }).usage;
    // <s>, '▁', one token a character.
    assert.deepEqual(u1, {
      prompt_tokens: doc.length + 5,
      completion_tokens: 3,
      total_tokens: doc.length + 8,
      prompt_tokens_details: { cached_tokens: 0 },
    });

    // Same document, another question, streamed: the document comes from the slot's cache.
    const second = await post(`${base}/v1/completions`, {
      model: 'm',
      prompt: doc + 'Q2?',
      max_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
    });
    assert.equal(second.status, 200);
    const events = second.text.split('\n\n').filter((e) => e !== '');
    assert.equal(events.at(-1), 'data: [DONE]');
    const parsed = events
      .slice(0, -1)
      .map((e) => JSON.parse(e.slice('data: '.length)) as Record<string, unknown>);
    assert.equal(parsed.filter((e) => (e.choices as unknown[]).length === 1).length, 5 + 1); // tokens, finish
    assert.deepEqual(parsed.at(-1)!.usage, {
      prompt_tokens: doc.length + 5,
      completion_tokens: 5,
      total_tokens: doc.length + 10,
      prompt_tokens_details: { cached_tokens: doc.length + 3 },
    });

    const metrics = await (await request(`${base}/metrics`)).body.text();
    assert.match(metrics, /^vllm:num_requests_running\{model_name="m"\} 0$/m);
    assert.match(
      metrics,
      new RegExp(`^vllm:prefix_cache_hits_total\\{model_name="m"\\} ${doc.length + 3}$`, 'm'),
    );

    for (const bad of [
      { model: 'm', prompt: 3 },
      { model: 'm', prompt: 'x', max_tokens: 0 },
      { model: 'm', prompt: 'x'.repeat(600) },
    ]) {
      const r = await post(`${base}/v1/completions`, bad);
      assert.equal(r.status, 400, r.text);
    }
    const r = await request(`${base}/v1/completions`, { method: 'POST', body: '{not json' });
    assert.equal(r.statusCode, 400);
    await r.body.dump();
  });
});

test('--metrics llamacpp: the page llama-server --metrics serves, read by the router as engine load; /props its slots', async () => {
  await withEngine(['--metrics', 'llamacpp'], async (base) => {
    assert.equal(
      (await post(`${base}/v1/completions`, { model: 'm', prompt: 'Hello there.', max_tokens: 2 })).status,
      200,
    );
    const page = await (await request(`${base}/metrics`)).body.text();
    assert.doesNotMatch(page, /vllm:/);
    assert.match(page, /^llamacpp:requests_processing 0$/m);
    const m = parseEngineMetrics(page, 1);
    assert.equal(m?.running, 0);
    assert.equal(m?.waiting, 0);
    assert.equal(m?.prefixCacheQueries, undefined, 'llama-server reports no prefix-cache counters');
    const props = await (await request(`${base}/props`)).body.json();
    assert.deepEqual(parseLlamaProps(props), { tokens: 2 * 512, slots: 2 });
  });
});
