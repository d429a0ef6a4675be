/**
 * `llmlb serve --workers 2`: real processes (the built CLI when dist/ exists, else tsx), real
 * HTTP, emulated engines. Each engine sits behind a counting proxy, so the test sees exactly how
 * many requests a backend holds at once, whichever worker sent them.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { countingHop, type CountedEngine } from '../bench/replicas-fleet.js';
import { OUTPUT_TOKENS_HEADER } from '../src/engine/server.js';
import { engine, fastProfile, waitFor } from './helpers.js';

const CLI = existsSync('dist/cli.js') ? ['dist/cli.js'] : ['--import', 'tsx', 'src/cli.ts'];

/** The workers of a primary: its child processes, less tsx's esbuild service (run from src/). */
function children(pid: number): number[] {
  const r = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' });
  return r.stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map(Number)
    .filter((c) => {
      try {
        return readFileSync(`/proc/${c}/comm`, 'utf8').trim() !== 'esbuild';
      } catch {
        return true; // no /proc: every child counts
      }
    });
}

async function start(
  config: string,
  workers: string,
): Promise<{ child: ChildProcess; url: string; out: () => string }> {
  const child = spawn(process.execPath, [...CLI, 'serve', '--config', config, '--workers', workers], {
    env: { ...process.env, LLMLB_LOG_LEVEL: 'error' },
  });
  let text = '';
  child.stderr!.on('data', (d: Buffer) => (text += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no banner within 20 s: ${text}`));
    }, 20_000);
    child.stdout!.on('data', (d: Buffer) => {
      text += d.toString();
      const m = /llmlb listening on (http:\/\/\S+)\n/.exec(text);
      if (m && /^workers: /m.test(text)) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.on('exit', (code) => reject(new Error(`exited ${code}: ${text}`)));
  });
  return { child, url, out: () => text };
}

async function stop(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  child.kill('SIGTERM');
  // A shutdown that hangs fails the test (and leaves nothing behind).
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  const code = await exited;
  clearTimeout(timer);
  return code;
}

/**
 * One generation of about `tokens` steps; resolves with the status, 0 when the connection broke,
 * -1 when nothing came back within 20 s.
 */
async function generate(url: string, tokens: number): Promise<number> {
  const signal = AbortSignal.timeout(20_000);
  try {
    const res = await fetch(`${url}/api/generate`, {
      signal,
      method: 'POST',
      headers: { [OUTPUT_TOKENS_HEADER]: String(tokens) },
      body: '{"model":"m1","prompt":"hello","stream":false}',
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return signal.aborted ? -1 : 0;
  }
}

describe('serve --workers 2 (node:cluster, one view through the primary)', () => {
  const engines: { close(): Promise<void> }[] = [];
  const proxies: CountedEngine[] = [];
  let config = '';

  before(async () => {
    for (let i = 0; i < 2; i++) {
      // 4 slots, ~5 ms a step: a request of 20 tokens holds its slot ~100 ms.
      const e = await engine({ profile: fastProfile({ baseStepS: 0.005, slots: 4 }) });
      engines.push(e);
      proxies.push(await countingHop(e.url));
    }
    const dir = mkdtempSync(join(tmpdir(), 'llmlb-workers-'));
    config = join(dir, 'workers.yaml');
    writeFileSync(
      config,
      [
        'server: { host: 127.0.0.1, port: 0 }',
        'policy: { name: least-connections }',
        'health: { probeIntervalMs: 100, scrapeIntervalMs: 100 }',
        'admin: { token: t0ken }',
        'backends:',
        ...proxies.map(
          (p, i) => `  - { name: e${i}, url: "${p.url}", api: ollama, models: [m1], maxConcurrency: 2 }`,
        ),
        '',
      ].join('\n'),
    );
  });

  after(async () => {
    for (const p of proxies) await p.close();
    for (const e of engines) await e.close();
  });

  it('many concurrent requests through the shared port: all answered, no backend past its cap', async () => {
    const { child, url, out } = await start(config, process.env.WK ?? '2');
    try {
      assert.equal(children(child.pid!).length, 2, 'two workers');
      for (const p of proxies) p.resetPeak();
      const statuses = await Promise.all(Array.from({ length: 60 }, () => generate(url, 20)));
      assert.deepEqual(
        statuses.filter((s) => s !== 200),
        [],
        `every request answered 200; router said:\n${out()}`,
      );
      for (const p of proxies) assert.ok(p.peak <= 2, `engine held ${p.peak} at once (cap 2)`);
      // Both backends used to their cap: the workers together got the whole of each cap.
      assert.ok(
        proxies.every((p) => p.peak === 2),
        `peaks ${proxies.map((p) => p.peak).join(',')}`,
      );
      // /metrics sums the workers: one scrape (whichever worker takes it) counts all 60.
      const text = await (await fetch(`${url}/metrics`)).text();
      const served = [...text.matchAll(/^llmlb_requests_total\{[^}]*status="200"[^}]*\} (\d+)/gm)].reduce(
        (n, m) => n + Number(m[1]),
        0,
      );
      assert.ok(served >= 60, `metrics counted ${served} answered requests:\n${text.slice(0, 400)}`);
      assert.match(text, /^llmlb_workers_ready 2$/m);
    } finally {
      assert.equal(await stop(child), 0, 'SIGTERM: a clean exit');
    }
    assert.deepEqual(children(child.pid!), [], 'no worker left behind');
  });

  it('kill -9 of one worker: only its requests fail, it is restarted, its allowance returns, caps hold', async () => {
    const { child, url } = await start(config, '2');
    try {
      const before = children(child.pid!);
      assert.equal(before.length, 2);
      for (const p of proxies) p.resetPeak();
      // ~400 ms each: the kill lands while both workers hold requests.
      const run = Promise.all(Array.from({ length: 40 }, () => generate(url, 80)));
      await new Promise((r) => setTimeout(r, 300));
      process.kill(before[0]!, 'SIGKILL');
      const statuses = await run;
      const failed = statuses.filter((s) => s !== 200);
      // Connections that reached the dead worker break (status 0); nothing else fails.
      assert.ok(
        failed.every((s) => s === 0),
        `failures other than broken connections: ${failed.join(',')}`,
      );
      assert.ok(failed.length > 0 && failed.length < 40, `${failed.length} of 40 failed`);
      for (const p of proxies) assert.ok(p.peak <= 2, `engine held ${p.peak} at once (cap 2)`);
      // Restarted (backoff 100 ms first), serving again.
      await waitFor(
        () => children(child.pid!).filter((p) => !before.includes(p)).length === 1,
        5000,
        'a new worker',
      );
      await waitFor(() => children(child.pid!).length === 2, 5000, 'two workers again');
      // The dead worker's allowance returned: the cap is usable in full again, within 2 s.
      for (const p of proxies) p.resetPeak();
      const t0 = Date.now();
      const again = await Promise.all(Array.from({ length: 16 }, () => generate(url, 20)));
      assert.deepEqual(
        again.filter((s) => s !== 200),
        [],
      );
      assert.ok(Date.now() - t0 < 2000, `16 requests took ${Date.now() - t0} ms`);
      for (const p of proxies) assert.equal(p.peak, 2, 'the whole cap in use again, never more');
      const text = await (await fetch(`${url}/metrics`)).text();
      assert.match(text, /^llmlb_worker_restarts_total 1$/m);
    } finally {
      assert.equal(await stop(child), 0);
    }
  });

  it('an admin change reaches every worker, and a worker started later', async () => {
    const { child, url } = await start(config, '2');
    /** e1's draining flag as seen by n workers in turn (a new connection each: round-robin). */
    const drained = async (n: number): Promise<boolean[]> => {
      const out: boolean[] = [];
      for (let i = 0; i < n; i++) {
        const body = await new Promise<string>((resolve, reject) => {
          get(
            `${url}/admin/backends`,
            { agent: false, headers: { authorization: 'Bearer t0ken' } },
            (res) => {
              let text = '';
              res.on('data', (d: Buffer) => (text += d.toString()));
              res.on('end', () => resolve(text));
            },
          ).on('error', reject);
        });
        const state = JSON.parse(body) as { backends: { name: string; draining: boolean }[] };
        out.push(state.backends.find((b) => b.name === 'e1')!.draining);
      }
      return out;
    };
    try {
      assert.deepEqual(await drained(4), [false, false, false, false]);
      const res = await fetch(`${url}/admin/backends/e1/drain`, {
        method: 'POST',
        headers: { authorization: 'Bearer t0ken' },
      });
      assert.equal(res.status, 200, await res.text());
      await new Promise((r) => setTimeout(r, 100)); // the relay: one IPC hop each way
      assert.deepEqual(await drained(4), [true, true, true, true], 'every worker drains e1');
      const before = children(child.pid!);
      process.kill(before[0]!, 'SIGKILL');
      await waitFor(
        () => children(child.pid!).filter((p) => !before.includes(p)).length === 1,
        5000,
        'a new worker',
      );
      // The new worker listens once ready; the primary replayed the change to it before that.
      const deadline = Date.now() + 5000;
      let seen: boolean[] = [];
      while (Date.now() < deadline) {
        seen = await drained(4);
        const metrics = await (await fetch(`${url}/metrics`)).text();
        if (/^llmlb_workers_ready 2$/m.test(metrics)) break;
      }
      assert.deepEqual(
        await drained(6),
        [true, true, true, true, true, true],
        `after restart: ${seen.join(',')}`,
      );
    } finally {
      assert.equal(await stop(child), 0);
    }
  });

  it('quotas on state.redis hold exactly across workers: maxConcurrent 3 is never exceeded at the engine', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmlb-workers-'));
    const p = join(dir, 'quota-redis.yaml');
    const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';
    const prefix = `llmlb-workers-test-${process.pid}-${Date.now()}:`;
    writeFileSync(
      p,
      [
        'server: { host: 127.0.0.1, port: 0 }',
        `state: { redis: "${redisUrl}", keyPrefix: "${prefix}" }`,
        'quotas:',
        '  models:',
        '    m1: { maxConcurrent: 3, tokensPerMinute: 10000000, requestsPerMinute: 100000 }',
        'backends:',
        `  - { name: e0, url: "${proxies[0]!.url}", api: ollama, models: [m1] }`,
        '',
      ].join('\n'),
    );
    const { child, url } = await start(p, '2');
    try {
      proxies[0]!.resetPeak();
      const statuses = await Promise.all(Array.from({ length: 30 }, () => generate(url, 20)));
      assert.deepEqual(
        statuses.filter((x) => x !== 200),
        [],
      );
      assert.equal(proxies[0]!.peak, 3, 'the quota used in full, never more, by both workers together');
    } finally {
      assert.equal(await stop(child), 0);
      const redis = new Redis(redisUrl);
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
  });

  it(
    "sharedState: each worker applies the other's pushes; kill -9 of one drops its pushes from the survivor at once",
    { timeout: 60_000 },
    async (t) => {
      const dir = mkdtempSync(join(tmpdir(), 'llmlb-workers-'));
      const p = join(dir, 'shared-state.yaml');
      writeFileSync(
        p,
        [
          'server: { host: 127.0.0.1, port: 0 }',
          'policy: { name: least-connections }',
          'health: { probeIntervalMs: 100, scrapeIntervalMs: 100 }',
          'sharedState: {}', // defaults: heartbeat 200 ms, ttl 1500 ms
          'backends:',
          ...proxies.map(
            (x, i) => `  - { name: e${i}, url: "${x.url}", api: ollama, models: [m1], maxConcurrency: 2 }`,
          ),
          '',
        ].join('\n'),
      );
      /**
       * A metric summed over its series (the primary sums the workers' registries). A scrape on a
       * pooled connection to the killed worker breaks: asked again on another.
       */
      const metric = async (url: string, name: string): Promise<number> => {
        for (let attempt = 0; ; attempt++) {
          try {
            const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(3000) });
            const text = await res.text();
            return [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))].reduce(
              (n, m) => n + Number(m[1]),
              0,
            );
          } catch (err) {
            if (attempt >= 3) throw err;
          }
        }
      };
      const until = async (cond: () => Promise<boolean>, ms: number, what: string): Promise<void> => {
        const end = Date.now() + ms;
        while (!(await cond())) {
          if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      };
      const { child, url, out } = await start(p, '2');
      try {
        const before = children(child.pid!);
        assert.equal(before.length, 2);
        for (const x of proxies) x.resetPeak();
        const statuses = await Promise.all(Array.from({ length: 60 }, () => generate(url, 20)));
        assert.deepEqual(
          statuses.filter((s) => s !== 200),
          [],
          `every request answered 200; router said:\n${out()}`,
        );
        for (const x of proxies) assert.ok(x.peak <= 2, `engine held ${x.peak} at once (cap 2)`);
        // Each worker applied every push of the other: summed, the pushes applied remotely are every
        // push made (60, no retries), and each worker can apply only the other's.
        await until(
          async () => (await metric(url, 'llmlb_shared_state_remote_pushes')) === 60,
          2000,
          '60 pushes',
        );
        assert.equal(
          await metric(url, 'llmlb_shared_state_routers'),
          2,
          `each worker hears the other (restarts: ${await metric(url, 'llmlb_worker_restarts_total')}); router said:\n${out()}`,
        );
        assert.equal(await metric(url, 'llmlb_shared_state_remote_in_flight'), 0, 'every answer heard too');

        // kill -9 mid-run: ~1 s requests, 16 of them on 4 slots (12 wait in the workers' queues).
        for (const x of proxies) x.resetPeak();
        const run = Promise.all(Array.from({ length: 16 }, () => generate(url, 200)));
        await until(
          async () => (await metric(url, 'llmlb_shared_state_remote_in_flight')) === 4,
          3000,
          'both workers push',
        );
        process.kill(before[0]!, 'SIGKILL');
        const killedAt = Date.now();
        // The survivor drops the dead worker's pushes on the primary's notice, well before the ttl.
        await until(
          async () => (await metric(url, 'llmlb_shared_state_departed_routers')) === 1,
          2000,
          'the survivor told',
        );
        const dropMs = Date.now() - killedAt;
        t.diagnostic(`the survivor dropped the dead worker's pushes ${dropMs} ms after the kill`);
        assert.ok(dropMs < 500, `dropped after ${dropMs} ms`);
        // What the workers hear of each other's flights is no more than what they hold (the dead
        // worker's pushes are gone: the survivor's count of it is 0).
        assert.ok(
          (await metric(url, 'llmlb_shared_state_remote_in_flight')) <=
            (await metric(url, 'llmlb_backend_in_flight')),
          'no dead pushes counted',
        );
        const after = await run;
        const failed = after.filter((s) => s !== 200);
        assert.ok(
          failed.every((s) => s === 0),
          `failures other than broken connections: ${failed.join(',')}`,
        );
        assert.ok(failed.length > 0 && failed.length < 16, `${failed.length} of 16 failed`);
        for (const x of proxies) assert.ok(x.peak <= 2, `engine held ${x.peak} at once (cap 2)`);
        // Not by the ttl: nobody was presumed gone for silence.
        assert.equal(await metric(url, 'llmlb_shared_state_expired_routers'), 0);
      } finally {
        assert.equal(await stop(child), 0);
      }
    },
  );

  it('--workers 2 with in-memory quotas is refused (limits would multiply): exit 2 naming state.redis', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmlb-workers-'));
    const p = join(dir, 'quota.yaml');
    writeFileSync(
      p,
      `backends:\n  - { name: a, url: "http://127.0.0.1:9", models: [m1] }\nquotas:\n  models:\n    m1: { maxConcurrent: 4, tokensPerMinute: 100000, requestsPerMinute: 60 }\n`,
    );
    const r = spawnSync(process.execPath, [...CLI, 'serve', '--config', p, '--workers', '2'], {
      encoding: 'utf8',
    });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /quotas.*needs state\.redis/);
  });
});
