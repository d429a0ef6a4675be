/**
 * `npm run bench:faults`: the failures a fleet really has, against llmlb over emulated engines on
 * loopback, one scenario at a time: a backend killed -9 mid-run, one that hangs while its probe
 * answers, 5xx and 429 bursts, streams dying mid-way, a Redis outage and a Redis flush under
 * quotas, slow-body clients, and (issue #31) several `llmlb serve` processes sharing their view
 * through a private Redis: one router killed -9 mid-run, and the Redis flushed, killed and
 * restarted, and cut off from one router only. Per scenario it prints requests, answered, clean errors, 5xx,
 * lost (no answer, or a stream cut without an error chunk), requests past the deadline, the
 * longest latency, and whether in-flight slots, the router queue and quota leases went back to 0.
 *
 * The router runs with the configuration a file with these backends gets (every default from
 * the config schema), in this process so its counters can be read directly. Engines run in this
 * process too, except the one killed -9, which is a child process. Every phase is bounded.
 * Knobs: FAULTS_ONLY=name,name (run some scenarios), FAULTS_REQUESTS (per scenario, 300),
 * FAULTS_TTL_MS (sharedView.ttlMs of the several-routers scenarios).
 * Exit code 1 when a scenario lost a request, left a slot or lease, or ran past its deadline.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { parseConfig } from '../src/config/load.js';
import { policyNames } from '../src/core/policies/index.js';
import { defaultProfile, startEngine, type EngineServer } from '../src/engine/server.js';
import { silentLogger } from '../src/log.js';
import { Router } from '../src/proxy/router.js';
import { formatTable } from '../src/report/table.js';
import { RedisServer } from '../src/state/redis-server.testing.js';
import {
  countingHop,
  routerYaml,
  sharedFields,
  sharedViewUp,
  spawnRouter,
  tcpHop,
  type CountedEngine,
  type RouterProc,
} from './replicas-fleet.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const REQUESTS = Math.max(20, Number(process.env.FAULTS_REQUESTS ?? 300));
const ONLY = (process.env.FAULTS_ONLY ?? '').split(',').filter((s) => s !== '');
const TOKEN = 'bench-faults';
const CONCURRENCY = 24;
/** sharedView.ttlMs of the several-routers scenarios (default: the config's, 1500). */
const TTL_MS = process.env.FAULTS_TTL_MS ? Number(process.env.FAULTS_TTL_MS) : undefined;

interface Outcome {
  status: number;
  /** A complete answer, or an error the client can read (error JSON, error chunk/event). */
  clean: boolean;
  ok: boolean;
  /** No answer at all, or a stream cut silently. */
  lost: boolean;
  ms: number;
  timedOut: boolean;
}

interface Row {
  name: string;
  requests: number;
  ok: number;
  cleanErrors: number;
  s5xx: number;
  lost: number;
  pastDeadline: number;
  maxMs: number;
  deadlineMs: number;
  drained: boolean;
  note: string;
}

/** Engines fast enough that a scenario takes seconds, slow enough that requests overlap. */
const profile = () =>
  defaultProfile({ slots: 8, baseStepS: 0.004, perSeqS: 0.0002, perTokenS: 0, prefillPerTokenS: 0 });

async function engine(seed: number): Promise<EngineServer> {
  return startEngine({ port: 0, api: 'both', models: ['m1'], profile: profile(), timeScale: 1, seed });
}

/** An engine in its own process, for kill -9. */
async function childEngine(): Promise<{ url: string; proc: ChildProcess }> {
  const proc = spawn(
    process.execPath,
    ['--import', 'tsx', join(ROOT, 'src/cli.ts'), 'engine', '--port', '0', '--model', 'm1', '--slots', '8'],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const url = await new Promise<string>((res, rej) => {
    let out = '';
    const t = setTimeout(() => rej(new Error('engine child did not start in 20 s')), 20_000);
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(t);
        res(m[1]!);
      }
    });
    proc.once('exit', (code) => rej(new Error(`engine child exited (${code})`)));
  });
  return { url, proc };
}

function routerConfig(backends: { name: string; url: string }[], extra = ''): string {
  return [
    'server: { host: 127.0.0.1, port: 0 }',
    `admin: { token: ${TOKEN} }`,
    'log: { level: silent }',
    'backends:',
    ...backends.map((b) => `  - { name: ${b.name}, url: ${b.url}, models: [m1] }`),
    extra,
  ].join('\n');
}

async function startRouter(yaml: string): Promise<{ router: Router; url: string }> {
  const cfg = parseConfig(yaml, { knownPolicies: policyNames(), source: 'bench-faults' });
  const router = new Router(cfg, silentLogger());
  return { router, url: await router.listen('127.0.0.1', 0) };
}

/**
 * `n` in-process engines (backends a, b, c…), a router over them with `extra` config lines, and
 * `body` run against them; engines and router are closed whatever `body` does.
 */
async function onFleet(
  n: number,
  extra: string,
  body: (engines: EngineServer[], router: Router, url: string) => Promise<Row>,
): Promise<Row> {
  const engines = await Promise.all(Array.from({ length: n }, (_, i) => engine(i + 1)));
  const backends = engines.map((e, i) => ({ name: String.fromCharCode(97 + i), url: e.url }));
  const { router, url } = await startRouter(routerConfig(backends, extra));
  try {
    return await body(engines, router, url);
  } finally {
    await router.close();
    await Promise.all(engines.map((e) => e.close()));
  }
}

/** One request of the mix: Ollama or OpenAI, streamed or not; its outcome judged as a client would. */
async function one(url: string, i: number, deadlineMs: number): Promise<Outcome> {
  const openai = i % 2 === 1;
  const stream = i % 3 !== 0;
  const t0 = performance.now();
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), deadlineMs);
  const path = openai ? '/v1/chat/completions' : '/api/generate';
  const body = openai
    ? { model: 'm1', messages: [{ role: 'user', content: `q${i}` }], stream }
    : { model: 'm1', prompt: `q${i}`, stream };
  try {
    const res = await fetch(url + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-llmlb-output-tokens': String(8 + (i % 40)) },
      body: JSON.stringify(body),
      signal: ac.signal,
    });
    const text = await res.text();
    const ms = performance.now() - t0;
    let clean: boolean;
    let ok = false;
    if (res.status !== 200) clean = /"error"/.test(text);
    else if (!stream) {
      ok = openai ? /"choices"/.test(text) : /"done":true/.test(text);
      clean = ok || /"error"/.test(text);
    } else if (openai) {
      ok = text.includes('data: [DONE]');
      clean = ok || /data: \{"error"/.test(text);
    } else {
      const last = text.trim().split('\n').pop() ?? '';
      ok = /"done":true/.test(last);
      clean = ok || /"error"/.test(last);
    }
    return { status: res.status, clean, ok, lost: !clean, ms, timedOut: false };
  } catch {
    const ms = performance.now() - t0;
    return { status: 0, clean: false, ok: false, lost: true, ms, timedOut: ac.signal.aborted };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `n` requests at CONCURRENCY; `during` runs alongside (the fault). With `paceMs` each client
 * pauses between requests, so fast refusals do not use the whole budget in a moment.
 */
async function drive(
  url: string,
  n: number,
  deadlineMs: number,
  during: () => Promise<void>,
  paceMs = 0,
): Promise<Outcome[]> {
  const out: Outcome[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) {
      out.push(await one(url, next++, deadlineMs));
      if (paceMs > 0) await sleep(paceMs);
    }
  };
  await Promise.all([...Array.from({ length: CONCURRENCY }, worker), during()]);
  return out;
}

async function drained(router: Router): Promise<boolean> {
  const end = Date.now() + 5000;
  for (;;) {
    const leases = router.admission.hasQuota('m1')
      ? (await router.admission.store.snapshot().catch(() => [])).reduce(
          (s: number, m: { inFlight?: number }) => s + (m.inFlight ?? 0),
          0,
        )
      : 0;
    if (router.scheduler.inFlightTotal === 0 && router.scheduler.queueLength === 0 && leases === 0)
      return true;
    if (Date.now() > end) return false;
    await sleep(50);
  }
}

function row(name: string, outs: Outcome[], deadlineMs: number, ok: boolean, note: string): Row {
  return {
    name,
    requests: outs.length,
    ok: outs.filter((o) => o.ok).length,
    cleanErrors: outs.filter((o) => !o.ok && o.clean).length,
    s5xx: outs.filter((o) => o.status >= 500).length,
    lost: outs.filter((o) => o.lost).length,
    pastDeadline: outs.filter((o) => o.timedOut).length,
    maxMs: Math.max(0, ...outs.map((o) => o.ms)),
    deadlineMs,
    drained: ok,
    note,
  };
}

type Scenario = () => Promise<Row>;

const scenarios: Record<string, Scenario> = {
  async 'kill -9'() {
    const child = await childEngine();
    const [b, c] = await Promise.all([engine(2), engine(3)]);
    const { router, url } = await startRouter(
      routerConfig([
        { name: 'doomed', url: child.url },
        { name: 'b', url: b.url },
        { name: 'c', url: c.url },
      ]),
    );
    try {
      const outs = await drive(url, REQUESTS, 30_000, async () => {
        await sleep(700);
        child.proc.kill('SIGKILL');
      });
      return row('kill -9', outs, 30_000, await drained(router), 'one of 3 engines killed at 0.7 s');
    } finally {
      await router.close();
      await Promise.all([b.close(), c.close()]);
    }
  },

  async 'hang (probe alive)'() {
    // The default stall limit (health.stallMinMs 10 s) plus a retry: nothing may wait longer.
    const deadline = 15_000;
    return onFleet(3, '', async ([a], router, url) => {
      const outs = await drive(url, REQUESTS, deadline, async () => {
        await sleep(500);
        a!.setFaults({ hang: true });
      });
      const note = `engine a hangs from 0.5 s; a ejected: ${router.scheduler.backend('a')?.healthy === false}`;
      return row('hang (probe alive)', outs, deadline, await drained(router), note);
    });
  },

  async '5xx burst'() {
    return onFleet(3, '', async ([a, b], router, url) => {
      const outs = await drive(url, REQUESTS, 30_000, async () => {
        await sleep(300);
        a!.setFaults({ failRate: 1 });
        b!.setFaults({ failRate: 0.5 });
        await sleep(2000);
        a!.setFaults({});
        b!.setFaults({});
      });
      return row('5xx burst', outs, 30_000, await drained(router), 'a 100 % and b 50 % 500s for 2 s');
    });
  },

  async '429 burst'() {
    return onFleet(3, '', async (engines, router, url) => {
      const [a, b, c] = engines;
      const outs = await drive(url, REQUESTS, 30_000, async () => {
        await sleep(300);
        a!.setFaults({ saturateRate: 1, retryAfterS: 1 });
        b!.setFaults({ saturateRate: 1, retryAfterS: 1 });
        await sleep(1500);
        c!.setFaults({ saturateRate: 1, retryAfterS: 1 }); // everyone full for a moment
        await sleep(700);
        for (const e of engines) e.setFaults({});
      });
      const metrics = await (await fetch(`${url}/metrics`)).text();
      const retries = [...metrics.matchAll(/llmlb_retries_total\{[^}]*\} (\d+)/g)].reduce(
        (sum, m) => sum + Number(m[1]),
        0,
      );
      const r429 = outs.filter((o) => o.status === 429).length;
      const note = `a,b 429 for 2.2 s, all for 0.7 s; ${retries} retries, ${r429} clients told 429 + Retry-After`;
      return row('429 burst', outs, 30_000, await drained(router), note);
    });
  },

  async 'mid-stream death'() {
    return onFleet(2, '', async ([a], router, url) => {
      a!.setFaults({ dieMidStreamAfterChunks: 3 });
      const outs = await drive(url, REQUESTS, 30_000, async () => undefined);
      const note = 'a cuts every stream after 3 chunks';
      return row('mid-stream death', outs, 30_000, await drained(router), note);
    });
  },

  async 'redis outage'() {
    return redisScenario(
      'redis outage',
      async (redis) => {
        await sleep(500);
        await redis.kill();
        await sleep(2000);
        await redis.restart();
      },
      400,
    );
  },

  async 'redis flush'() {
    return redisScenario('redis flush', async (redis) => {
      await sleep(700);
      const c = new Redis(redis.url);
      await c.flushall();
      c.disconnect();
    });
  },

  async 'router kill -9'() {
    const redis = await RedisServer.start();
    const prefix = 'faults-replicas';
    let killedAt = 0;
    let returnedMs = NaN;
    let doomedInFlight = 0;
    let doomedQueued = 0;
    try {
      const run = await onReplicas([redis.url, redis.url, redis.url], prefix, async (r, alive) => {
        await sleep(1000);
        const doomed = r.routers[2]!;
        doomedInFlight = await routerInFlight(doomed.url);
        doomedQueued = await routerQueue(doomed.url);
        killedAt = performance.now();
        alive[2] = false;
        await doomed.kill9();
        // Its held slots are back when no backend's hash has its field any more.
        const conn = new Redis(redis.url);
        try {
          returnedMs = await until(async () => {
            const f = await sharedFields(conn, prefix, ['a', 'b', 'c']);
            return [...f.values()].every((m) => ![...m.keys()].some((id) => id.startsWith(doomed.idPrefix)));
          }, 10_000);
          returnedMs = performance.now() - killedAt;
        } finally {
          conn.disconnect();
        }
      });
      try {
        const failed = run.outs.filter((o) => !o.ok);
        // A failure is expected only for a request the killed router held when it died.
        const expected = failed.filter((o) => o.router === 2 && o.startedAt < killedAt && o.status === 0);
        const after = run.outs.filter((o) => o.startedAt > killedAt);
        const peaks = run.hops.map((h) => h.peak);
        const survivorsUp = await Promise.all(run.routers.slice(0, 2).map((x) => sharedViewUp(x.url)));
        const survivorsIdle = await Promise.all(run.routers.slice(0, 2).map((x) => routerInFlight(x.url)));
        const engineIdle = run.hops.every((h) => h.inFlight === 0);
        const rowed = row('router kill -9', run.outs, 30_000, false, '');
        rowed.lost = failed.length - expected.length;
        rowed.cleanErrors = rowed.cleanErrors + expected.length;
        rowed.drained =
          engineIdle &&
          survivorsIdle.every((n) => n === 0) &&
          peaks.every((p) => p <= RCAP) &&
          returnedMs <= 2500;
        rowed.note =
          `3 routers, 1 Redis; router 2 killed at 1 s (${doomedInFlight} at engines, ${doomedQueued} queued): ${expected.length} connection errors, ` +
          `all its own in-flight; its slots back in ${(returnedMs / 1000).toFixed(2)} s; ` +
          `${after.filter((o) => o.ok).length}/${after.length} later requests ok on the 2 others (shared_view_up ${survivorsUp.join(',')}); ` +
          `engine peaks ${peaks.join('/')} (cap ${RCAP})`;
        return rowed;
      } finally {
        await run.close();
      }
    } finally {
      await redis.kill();
    }
  },

  async 'shared view: redis faults'() {
    const redis = await RedisServer.start();
    const hop = await tcpHop(redis.port);
    const prefix = 'faults-replicas';
    const notes: string[] = [];
    let recoveredPeaks: number[] = [];
    let cutPeaks: number[] = [];
    let cutWindowS = 0;
    try {
      const hopUrl = `redis://127.0.0.1:${hop.port}/0`;
      const run = await onReplicas([redis.url, redis.url, hopUrl], prefix, async (r) => {
        const ups = async (): Promise<string> =>
          (await Promise.all(r.routers.map((x) => sharedViewUp(x.url)))).join(',');
        await sleep(500);
        for (const h of r.hops) h.resetPeak();
        const c = new Redis(redis.url);
        await c.flushdb();
        c.disconnect();
        await sleep(700);
        notes.push(`FLUSHDB: peaks ${r.hops.map((h) => h.peak).join('/')}, up ${await ups()}`);
        await redis.kill();
        await sleep(500);
        notes.push(`Redis killed: up ${await ups()}`);
        await sleep(1500);
        await redis.restart();
        await until(async () => (await ups()) === '1,1,1', 10_000);
        notes.push('restarted: up 1,1,1');
        // What the outage let in (degraded: configured caps) drains, then the caps hold again.
        await sleep(2000);
        for (const h of r.hops) h.resetPeak();
        await sleep(1000);
        recoveredPeaks = r.hops.map((h) => h.peak);
        for (const h of r.hops) h.resetPeak();
        const cutAt = performance.now();
        hop.cut();
        await sleep(500);
        notes.push(`router 2 cut off: up ${await ups()}`);
        // For ttlMs (1.5 s) it keeps the allowance the others still count; then its configured caps.
        await sleep(1000);
        cutPeaks = r.hops.map((h) => h.peak);
        cutWindowS = (performance.now() - cutAt) / 1000;
        for (const h of r.hops) h.resetPeak();
        await sleep(1500);
        notes.push(`cut off > ttl (degraded, configured caps): peaks ${r.hops.map((h) => h.peak).join('/')}`);
        hop.mend();
        await until(async () => (await ups()) === '1,1,1', 10_000);
      });
      try {
        const drainedAll = run.hops.every((h) => h.inFlight === 0);
        const over = [...recoveredPeaks, ...cutPeaks].some((p) => p > RCAP);
        notes.push(
          `peaks 2-3 s after recovery ${recoveredPeaks.join('/')}, first ${cutWindowS.toFixed(2)} s of the cut ${cutPeaks.join('/')} (cap ${RCAP})${over ? ' OVER CAP' : ''}`,
        );
        return row('shared view: redis faults', run.outs, 30_000, drainedAll && !over, notes.join('; '));
      } finally {
        await run.close();
      }
    } finally {
      await hop.close();
      await redis.kill();
    }
  },

  async 'slow bodies'() {
    return onFleet(2, 'timeouts: { bodyMs: 2000 }', async (_engines, router, url) => {
      const { port } = new URL(url);
      let cut408 = 0;
      let stillOpen = 0;
      const outs = await drive(url, REQUESTS, 30_000, async () => {
        const slow = Array.from(
          { length: 200 },
          () =>
            new Promise<void>((res) => {
              const s = connect(Number(port), '127.0.0.1', () =>
                s.write('POST /api/generate HTTP/1.1\r\nhost: x\r\ncontent-length: 500\r\n\r\n{"mo'),
              );
              let got = '';
              s.on('data', (c: Buffer) => (got += c.toString()));
              const giveUp = setTimeout(() => {
                stillOpen++;
                s.destroy();
              }, 8000);
              s.on('close', () => {
                clearTimeout(giveUp);
                if (got.startsWith('HTTP/1.1 408')) cut408++;
                res();
              });
              s.on('error', () => undefined);
            }),
        );
        await Promise.all(slow);
      });
      const note = `200 slow-body sockets: ${cut408} cut with 408 by 2 s, ${stillOpen} still open at 8 s`;
      return row('slow bodies', outs, 30_000, (await drained(router)) && stillOpen === 0, note);
    });
  },
};

const CAP = 6;

/** Backend caps in the several-routers scenarios (engines have 8 slots: the cap binds). */
const RCAP = 4;

/** `llmlb_backend_in_flight` summed over a router's backends (-1: no answer). */
async function routerInFlight(url: string): Promise<number> {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    return [...text.matchAll(/^llmlb_backend_in_flight\{[^}]*\} (\d+)/gm)].reduce(
      (a, m) => a + Number(m[1]),
      0,
    );
  } catch {
    return -1;
  }
}

/** `llmlb_router_queue_length` (-1: no answer). */
async function routerQueue(url: string): Promise<number> {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    const m = /^llmlb_router_queue_length (\d+)/m.exec(text);
    return m ? Number(m[1]) : 0;
  } catch {
    return -1;
  }
}

interface ReplicaRun {
  outs: (Outcome & { router: number; startedAt: number })[];
  hops: CountedEngine[];
  routers: RouterProc[];
}

/**
 * 3 engines (each behind a counting hop, cap RCAP) and 3 `llmlb serve` processes sharing their
 * view through `redisUrls[i]`; REQUESTS requests at CONCURRENCY spread round-robin over the
 * routers still alive (`alive`), and on until `during` (the fault, run alongside) is over.
 */
async function onReplicas(
  redisUrls: string[],
  prefix: string,
  during: (run: ReplicaRun, alive: boolean[]) => Promise<void>,
): Promise<ReplicaRun & { close(): Promise<void> }> {
  const engines = await Promise.all([1, 2, 3].map((i) => engine(i)));
  const hops = await Promise.all(engines.map((e) => countingHop(e.url)));
  const backends = hops.map((h, i) => ({ name: String.fromCharCode(97 + i), url: h.url, cap: RCAP }));
  const routers = await Promise.all(
    redisUrls.map((redis) =>
      spawnRouter(
        routerYaml({
          backends,
          policy: 'least-connections',
          model: 'm1',
          shared: { redis, prefix, ...(TTL_MS ? { ttlMs: TTL_MS } : {}) },
          extra: 'timeouts: { firstByteMs: 30000 }',
        }).replaceAll('api: openai', 'api: ollama'),
      ),
    ),
  );
  const close = async (): Promise<void> => {
    await Promise.all(routers.map((r) => r.close()));
    await Promise.all(hops.map((h) => h.close()));
    await Promise.all(engines.map((e) => e.close()));
  };
  const run: ReplicaRun = { outs: [], hops, routers };
  try {
    for (const r of routers) await until(() => sharedViewUp(r.url).then((u) => u === 1), 10_000);
    const alive = routers.map(() => true);
    let next = 0;
    let faultDone = false;
    const worker = async (): Promise<void> => {
      // At least REQUESTS, and load until the fault's script is over.
      while (next < REQUESTS || !faultDone) {
        const i = next++;
        let k = i % routers.length;
        while (!alive[k]) k = (k + 1) % routers.length;
        const startedAt = performance.now();
        const o = await one(routers[k]!.url, i, 30_000);
        run.outs.push({ ...o, router: k, startedAt });
      }
    };
    const fault = async (): Promise<void> => {
      try {
        await during(run, alive);
      } finally {
        faultDone = true;
      }
    };
    await Promise.all([...Array.from({ length: CONCURRENCY }, worker), fault()]);
  } catch (err) {
    await close();
    throw err;
  }
  return { ...run, close };
}

async function until(cond: () => Promise<boolean>, ms: number): Promise<number> {
  const t0 = Date.now();
  while (!(await cond())) {
    if (Date.now() - t0 > ms) throw new Error(`condition not met within ${ms} ms`);
    await sleep(10);
  }
  return Date.now() - t0;
}

/** Quota-gated traffic (cap CAP) on a private Redis that the fault kills or flushes. */
async function redisScenario(
  name: string,
  fault: (r: RedisServer) => Promise<void>,
  paceMs = 0,
): Promise<Row> {
  const redis = await RedisServer.start();
  const quota =
    `state: { redis: '${redis.url}', keyPrefix: 'faults:{q}:' }\n` +
    `quotas: { models: { m1: { maxConcurrent: ${CAP}, tokensPerMinute: 100000000, requestsPerMinute: 1000000 } } }`;
  try {
    return await onFleet(2, quota, async (_engines, router, url) => {
      let maxInFlight = 0;
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          maxInFlight = Math.max(maxInFlight, router.scheduler.inFlightTotal);
          await sleep(5);
        }
      })();
      let outs: Outcome[];
      try {
        outs = await drive(url, REQUESTS, 30_000, () => fault(redis), paceMs);
      } finally {
        sampling = false;
        await sampler;
      }
      const r503 = outs.filter((o) => o.status === 503).length;
      const note = `cap ${CAP}: at most ${maxInFlight} in flight${maxInFlight > CAP ? ' (OVER CAP)' : ''}; ${r503} clean 503s${paceMs > 0 ? `; clients pause ${paceMs} ms between requests` : ''}`;
      return row(name, outs, 30_000, (await drained(router)) && maxInFlight <= CAP, note);
    });
  } finally {
    await redis.kill();
  }
}

async function main(): Promise<void> {
  const names = Object.keys(scenarios).filter((n) => ONLY.length === 0 || ONLY.includes(n));
  const rows: Row[] = [];
  const t0 = Date.now();
  for (const n of names) {
    process.stderr.write(`scenario: ${n} …\n`);
    rows.push(await scenarios[n]!());
  }
  const head = [
    'scenario',
    'requests',
    'ok',
    'clean err',
    '5xx',
    'lost',
    'past deadline',
    'max s',
    'back to 0',
    'what happened',
  ];
  const lines = rows.map((r) => [
    r.name,
    String(r.requests),
    String(r.ok),
    String(r.cleanErrors),
    String(r.s5xx),
    String(r.lost),
    `${r.pastDeadline} (${r.deadlineMs / 1000} s)`,
    (r.maxMs / 1000).toFixed(2),
    r.drained ? 'yes' : 'NO',
    r.note,
  ]);
  console.log(formatTable(head, lines, { left: head.map((_, i) => i) }));
  const bad = rows.filter((r) => r.lost > 0 || r.pastDeadline > 0 || !r.drained);
  console.log(
    `\n${rows.length} scenarios in ${((Date.now() - t0) / 1000).toFixed(1)} s: ` +
      (bad.length === 0
        ? 'PASS (0 lost, 0 un-released, 0 past deadline)'
        : `FAIL: ${bad.map((r) => r.name).join(', ')}`),
  );
  process.exit(bad.length === 0 ? 0 : 1);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
