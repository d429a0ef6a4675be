// Issue #34 items 1 and 2: non-streamed answers (the default of ollama.chat(), LangChain's invoke()
// and the OpenAI SDKs without `stream`) on a slow engine. Their first byte is the whole answer: it
// must neither look like a stuck backend nor be learned as prefill.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultProfile, OUTPUT_TOKENS_HEADER } from '../src/engine/server.js';
import { probeBackend } from '../src/fleet/probe.js';
import { backend, engine, hungFleet, post, router, settings, stallHealth } from './helpers.js';

/** `--speed 0.1` (a CPU box: ~0.18 s per output token), run 40× faster than real time. */
const SPEED = 0.1;
const TIME_SCALE = 40;

/** A prompt of about `tokens` tokens (the emulated engine counts 4 characters a token). */
const prompt = (i: number, tokens: number): string => `q${i} `.padEnd(tokens * 4, 'lorem ipsum ');

function chatBody(api: 'ollama' | 'openai', i: number, promptTokens: number, out: number, stream: boolean) {
  const messages = [{ role: 'user', content: prompt(i, promptTokens) }];
  return api === 'ollama'
    ? { model: 'm1', messages, stream, options: { num_predict: out } }
    : { model: 'm1', messages, stream, max_tokens: out };
}

async function nonStreamedRun(api: 'ollama' | 'openai'): Promise<void> {
  const e = await engine({ profile: defaultProfile({ speed: SPEED }), timeScale: TIME_SCALE });
  const { router: r, url } = await router(
    settings([backend('slow', e.url, { api })], {
      policy: { name: 'estimated-wait', params: {} },
      timeouts: { connectMs: 1000, firstByteMs: 60_000, idleMs: 60_000 },
      // A short stall limit, as the default 10 s is to a real-time engine: before #34's fix, the
      // first long answer here was 504 "backend ejected: stuck" and everything after it 503.
      health: stallHealth(200),
    }),
  );
  const path = api === 'ollama' ? '/api/chat' : '/v1/chat/completions';
  try {
    // Three short streamed warm-ups: they set the usual time to a first byte (short).
    for (let i = 0; i < 3; i++) {
      const res = await post(`${url}${path}`, chatBody(api, i, 8, 4, true), { [OUTPUT_TOKENS_HEADER]: '4' });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
    // 20 non-streamed chats in a row, prompts of 20 to 780 tokens; every fifth a long answer
    // (600 tokens: ~108 s at this speed, 2.7 s here), the others 20 to 80 tokens.
    for (let i = 0; i < 20; i++) {
      const out = i % 5 === 4 ? 600 : 20 + 15 * (i % 5);
      const res = await post(`${url}${path}`, chatBody(api, 100 + i, 20 + 40 * i, out, false), {
        [OUTPUT_TOKENS_HEADER]: String(out),
      });
      const text = await res.text();
      assert.equal(res.status, 200, `chat ${i} (${out} tokens): ${res.status} ${text.slice(0, 200)}`);
      assert.equal(res.headers.get('x-llmlb-backend'), 'slow');
    }
    assert.equal(r.scheduler.backend('slow')?.healthy, true, 'never ejected');
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.doesNotMatch(metrics, /llmlb_backend_ejections_total\{backend="slow"\} [1-9]/);

    // What the router learned (as /admin/backends shows it: `estimates`), in model seconds.
    const learned = r.scheduler.describe('slow');
    const prefill = learned.prefillSPerToken! * TIME_SCALE;
    const decode = learned.decodeSPerToken! * TIME_SCALE;
    // What `llmlb profile` measures on the same engine.
    const measured = await probeBackend({
      backend: e.url,
      model: 'm1',
      api,
      timeScale: TIME_SCALE,
      promptTokens: [128, 512, 1024],
      concurrency: [1],
      outputTokens: 64,
    });
    const mPrefill = measured.profile.prefillPerTokenS + measured.profile.perTokenS;
    const mDecode = measured.decode[0]!.stepS;
    const within2x = (a: number, b: number): boolean => a / b <= 2 && b / a <= 2;
    const why = `learned prefill ${prefill} s/token, decode ${decode} s/token; profile ${mPrefill}, ${mDecode}`;
    assert.ok(within2x(prefill, mPrefill), why);
    assert.ok(within2x(decode, mDecode), why);
  } finally {
    await r.close();
    await e.close();
  }
}

test('Ollama API: 20 non-streamed chats on a --speed 0.1 engine, some long: all 200, no ejection, rates learned', () =>
  nonStreamedRun('ollama'));

test('OpenAI API: 20 non-streamed chats on a --speed 0.1 engine, some long: all 200, no ejection, rates learned', () =>
  nonStreamedRun('openai'));

test('a backend that truly hangs is still found stuck with only non-streamed requests, and they are retried', async () => {
  const { router: r, url, close } = await hungFleet();
  try {
    const t0 = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        post(`${url}/api/chat`, {
          model: 'm1',
          messages: [{ role: 'user', content: `q${i}` }],
          stream: false,
          options: { num_predict: 50 },
        }).then(async (res) => ({
          status: res.status,
          backend: res.headers.get('x-llmlb-backend'),
          text: await res.text(),
        })),
      ),
    );
    const took = Date.now() - t0;
    for (const a of answers) assert.deepEqual([a.status, a.backend], [200, 'good'], a.text);
    // The same bound as the streamed case (request-path-faults.test.ts): limit 1.5 s, checked each second.
    assert.ok(took < 6000, `requests took ${took} ms`);
    assert.equal(r.scheduler.backend('hung')?.healthy, false, 'ejected');
  } finally {
    await close();
  }
});
