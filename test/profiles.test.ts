import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { Router } from '../src/proxy/router.js';
import type { EngineServer } from '../src/engine/server.js';
import { backend, engine, fastProfile, post, router as startRouter, settings, waitFor } from './helpers.js';

/**
 * Scheduling profiles on a live router: the config's profile routes real requests, every
 * decision carries the scorers' scores (/admin/decisions) and is logged at debug level.
 */
/** Admin routes are closed without a token. */
const AUTH = { authorization: 'Bearer t' };

describe('scheduling profiles on the live router', () => {
  let engines: EngineServer[];
  let router: Router;
  let url: string;
  const lines: Record<string, unknown>[] = [];

  before(async () => {
    engines = await Promise.all([
      engine({ profile: fastProfile({ slots: 1, baseStepS: 0.01 }) }),
      engine({ profile: fastProfile({ slots: 1, baseStepS: 0.01 }) }),
    ]);
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString().split('\n'))
          if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
        cb();
      },
    });
    router = new Router(
      settings([backend('a', engines[0]!.url), backend('b', engines[1]!.url)], {
        policy: { name: 'balanced', params: {} },
        scheduling: {
          plugins: [
            { type: 'queue-scorer' },
            { type: 'active-request-scorer', parameters: { requestTimeout: '1m' } },
            { type: 'max-score-picker', parameters: { maxNumOfEndpoints: 2 } },
          ],
          schedulingProfiles: [
            {
              name: 'balanced',
              plugins: [
                { pluginRef: 'queue-scorer', weight: 2 },
                { pluginRef: 'active-request-scorer' },
                { pluginRef: 'max-score-picker' },
              ],
            },
          ],
        },
        log: { level: 'debug', prompts: false },
        admin: { token: 't' },
      }),
      pino({ level: 'debug' }, sink),
    );
    url = await router.listen('127.0.0.1', 0);
  });

  after(async () => {
    await router.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('requests are spread by the profile and each decision is explained', async () => {
    const rs = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        post(`${url}/api/generate`, { model: 'm1', prompt: `hello ${i}`, stream: false }),
      ),
    );
    const by = new Map<string, number>();
    for (const r of rs) {
      assert.equal(r.status, 200);
      await r.arrayBuffer();
      const b = r.headers.get('x-llmlb-backend')!;
      by.set(b, (by.get(b) ?? 0) + 1);
    }
    // Active requests are scored: six concurrent requests cannot all land on one engine.
    assert.equal(by.get('a'), 3);
    assert.equal(by.get('b'), 3);

    const res = await fetch(`${url}/admin/decisions?limit=6`, { headers: AUTH });
    const { decisions } = (await res.json()) as {
      decisions: {
        policy: string;
        backend: string;
        scores?: {
          profile: string;
          backends: string[];
          scorers: { name: string; weight: number; scores: number[] }[];
          picked: string[];
        };
      }[];
    };
    assert.equal(decisions.length, 6);
    for (const d of decisions) {
      assert.equal(d.policy, 'balanced');
      assert.ok(d.scores, 'decision without scores');
      assert.deepEqual(
        d.scores.scorers.map((s) => [s.name, s.weight]),
        [
          ['queue-scorer', 2],
          ['active-request-scorer', 1],
        ],
      );
      assert.equal(d.scores.picked[0], d.backend);
      // maxNumOfEndpoints 2: the other backend is the retry endpoint.
      assert.equal(d.scores.picked.length, 2);
    }
    await waitFor(() => lines.filter((l) => l.msg === 'decision').length >= 6, 2000, 'debug lines');
    const dbg = lines.find((l) => l.msg === 'decision')!;
    assert.equal(dbg.level, 20);
    assert.equal(dbg.profile, 'balanced');
    assert.ok(Array.isArray(dbg.scorers));
    // No prompt text in decision lines.
    assert.ok(!JSON.stringify(lines.filter((l) => l.msg === 'decision')).includes('hello'));
  });

  test('the admin API can switch to a profile by name, and rejects an unknown one', async () => {
    const put = (body: unknown) =>
      fetch(`${url}/admin/policy`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', ...AUTH },
        body: JSON.stringify(body),
      });
    const bad = await put({ policy: 'nope' });
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /unknown policy 'nope'.*balanced/);
    const ok = await put({ policy: 'round-robin' });
    assert.equal(ok.status, 200);
    const back = await put({ policy: 'balanced' });
    assert.equal(back.status, 200);
    assert.equal(router.scheduler.policyName, 'balanced');
  });
});

test('outside debug level, at most 200 decisions a second carry their scores', async () => {
  const engines = await Promise.all([engine(), engine()]);
  const { router: r, url } = await startRouter(
    settings([backend('a', engines[0]!.url), backend('b', engines[1]!.url)], { admin: { token: 't' } }),
  );
  try {
    const N = 1000;
    const started = performance.now();
    const rs = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        post(
          `${url}/api/generate`,
          { model: 'm1', prompt: `q${i}`, stream: false },
          {
            'x-llmlb-output-tokens': '1',
          },
        ).then(async (res) => (await res.arrayBuffer(), res.status)),
      ),
    );
    const elapsedS = (performance.now() - started) / 1000;
    assert.deepEqual(new Set(rs), new Set([200]));
    const { decisions } = (await (
      await fetch(`${url}/admin/decisions?limit=1000`, { headers: AUTH })
    ).json()) as {
      decisions: { scores?: unknown }[];
    };
    assert.equal(decisions.length, N);
    const explained = decisions.filter((d) => d.scores !== undefined).length;
    // The budget starts full (200) and refills at 200 a second.
    assert.ok(explained >= 200, `only ${explained} decisions explained`);
    assert.ok(
      explained <= 200 + Math.ceil(200 * elapsedS) + 1,
      `${explained} decisions explained in ${elapsedS.toFixed(2)} s`,
    );
  } finally {
    await r.close();
    await Promise.all(engines.map((e) => e.close()));
  }
});
