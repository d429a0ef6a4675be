/**
 * Three llmlb routers in front of one engine with maxConcurrency 2, sharing their view through one
 * Redis: together they never push it more than 2 requests at once. A router whose Redis is gone
 * keeps routing on its own view and says so in /metrics.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { EngineServer } from '../src/engine/server.js';
import type { Router } from '../src/proxy/router.js';
import { backend, engine, fastProfile, post, router, settings, waitFor } from './helpers.js';

const REDIS = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';

describe('shared view: several routers on one fleet', () => {
  const closers: (() => Promise<void>)[] = [];
  after(async () => {
    for (const c of closers.reverse()) await c();
  });

  const metric = async (url: string, name: string): Promise<number> => {
    const text = await (await fetch(`${url}/metrics`)).text();
    const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
    return m ? Number(m[1]) : NaN;
  };

  it('three routers on one Redis never push a backend past its maxConcurrency together', async () => {
    const e: EngineServer = await engine({ profile: fastProfile({ slots: 8, baseStepS: 0.003 }) });
    closers.push(() => e.close());
    const prefix = `llmlb-test-sv-${process.pid}-${Date.now()}`;
    const rs: { router: Router; url: string }[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await router(
        settings([backend('gpu', e.url, { maxConcurrency: 2 })], {
          state: { redis: REDIS, keyPrefix: `${prefix}:{quota}:` },
          sharedView: { intervalMs: 20, ttlMs: 2000, headroom: 0, prefix },
        }),
      );
      closers.push(() => r.router.close());
      rs.push(r);
    }
    await waitFor(() => rs.every((r) => r.router.sharedView!.up), 5000, 'first rounds');
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const s = e.stats();
        peak = Math.max(peak, s.running + s.waiting);
        await new Promise((ok) => setTimeout(ok, 2));
      }
    })();
    const answers = await Promise.all(
      Array.from({ length: 18 }, (_, i) =>
        post(
          `${rs[i % 3]!.url}/api/generate`,
          { model: 'm1', prompt: `p${i}`, stream: false },
          { 'x-llmlb-output-tokens': '30' },
        ),
      ),
    );
    sampling = false;
    await sampler;
    for (const a of answers) {
      assert.equal(a.status, 200);
      await a.text();
    }
    assert.ok(peak <= 2, `the engine held ${peak} requests at once`);
    assert.equal(peak, 2, 'and the cap was used');
    for (const r of rs) assert.equal(await metric(r.url, 'llmlb_shared_view_up'), 1);
  });

  it('a router that loses Redis keeps routing on its own view and says so in /metrics', async () => {
    const e = await engine();
    closers.push(() => e.close());
    const r = await router(
      settings([backend('gpu', e.url, { maxConcurrency: 2 })], {
        sharedView: { intervalMs: 20, ttlMs: 2000, headroom: 0, prefix: 'x', redis: 'redis://127.0.0.1:1/0' },
      }),
    );
    closers.push(() => r.router.close());
    await waitFor(() => r.router.sharedView!.failures > 0, 5000, 'a failed round');
    const a = await post(`${r.url}/api/generate`, { model: 'm1', prompt: 'still here', stream: false });
    assert.equal(a.status, 200);
    await a.text();
    assert.equal(await metric(r.url, 'llmlb_shared_view_up'), 0);
    assert.ok((await metric(r.url, 'llmlb_shared_view_failed_rounds')) > 0);
    assert.equal(r.router.scheduler.backend('gpu')!.maxConcurrency, 2, 'its configured cap');
  });
});
