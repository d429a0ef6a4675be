// What the dashboard's live stats count for requests that generate nothing: embeddings and model
// lookups are requests, but neither 0 tokens nor "uncounted" generations.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backend, engine, post, router, settings } from './helpers.js';

test('embeddings and /api/show count as requests, never as tokens or uncounted', async (t) => {
  const e = await engine();
  const { router: r, url } = await router(settings([backend('a', e.url)]));
  t.after(async () => {
    await r.close();
    await e.close();
  });
  const ok = async (res: Promise<Response>): Promise<void> => {
    const x = await res;
    assert.equal(x.status, 200, `${x.url}: ${x.status}`);
    await x.arrayBuffer();
  };
  await ok(post(`${url}/v1/embeddings`, { model: 'm1', input: ['one', 'two'] }));
  await ok(post(`${url}/api/embed`, { model: 'm1', input: 'three' }));
  await ok(post(`${url}/api/show`, { model: 'm1' }));
  // The current second complete: every request above is in the rates.
  const s = r.stats.backend('a', Date.now() + 1000)!;
  assert.ok(s.requestsPerS > 0);
  assert.equal(s.tokensPerS, 0);
  assert.equal(s.uncountedPerS, 0);

  await ok(
    post(
      `${url}/api/generate`,
      { model: 'm1', prompt: 'hi', stream: false },
      { 'x-llmlb-output-tokens': '7' },
    ),
  );
  const g = r.stats.backend('a', Date.now() + 1000)!;
  assert.ok(g.tokensPerS > 0, 'a generation with usage counts its tokens');
  assert.equal(g.uncountedPerS, 0);
});
