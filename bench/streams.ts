/**
 * `npm run bench:streams`: 1,000 concurrent streaming clients held through llmlb (issue 16).
 *
 * Minimal streaming upstreams (bench/stream-upstream-child.ts: first NDJSON chunk at once, then
 * one every 100 ms for 20 s) run in one child process, llmlb (least-connections, no concurrency
 * cap, log silent, every other setting the config default) in another, both on bare node (src/
 * compiled first, see build.ts). This process is the client: undici pools with one socket per
 * stream, each stream one Ollama POST /api/generate with stream true, opened at an even rate
 * over the ramp and held to its end.
 *
 * Phase A: every client straight to the upstreams (spread evenly over them). Phase B: the same
 * through llmlb, in the same run. Per stream: TTFB (request dispatched → first body byte), whether
 * it completed (200, every line, the `done` line last). While all streams are held: llmlb's RSS
 * (VmRSS from /proc, sampled every 250 ms, peak) and CPU (share of one core), streams open at
 * the upstreams and llmlb's own in-flight count (GET /admin/backends). After: in-flight back to 0
 * (/admin/backends and /metrics `llmlb_backend_in_flight`).
 *
 * Targets: TTFB overhead (llmlb p50 − direct p50) ≤ 1 ms; llmlb peak RSS ≤ 300 MB. Client,
 * llmlb and upstreams share the machine's cores. Loopback only; every phase is bounded in time,
 * a watchdog bounds the whole, children are killed on any exit. JSON to bench-out/streams.json.
 *
 * Knobs (environment): BENCH_STREAMS (1000), BENCH_UPSTREAMS (2), BENCH_RAMP_S (5),
 * BENCH_HOLD_S (20: how long each stream lasts), BENCH_CHUNK_MS (100), BENCH_NICE (e.g. -10:
 * run this process and the children at that priority, so other work on a shared machine
 * delays them less; negative values need root), BENCH_STRICT=1 (exit 1 when a check fails).
 */
import { fork, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, setPriority } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool, request, type Dispatcher } from 'undici';
import { compileForBench } from './build.js';
import { envNumber, isReadyMessage } from './common.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
/** Its own build directory: bench:proxy wipes bench-out/.build when it starts and ends. */
const BUILD = join(ROOT, 'bench-out', '.build-streams');
const ADMIN_TOKEN = 'bench-streams-token';

const STREAMS = Math.floor(envNumber('BENCH_STREAMS', 1000, 1));
const UPSTREAMS = Math.floor(envNumber('BENCH_UPSTREAMS', 2, 1));
const RAMP_S = envNumber('BENCH_RAMP_S', 5, 0);
const HOLD_S = envNumber('BENCH_HOLD_S', 20, 1);
const CHUNK_MS = Math.floor(envNumber('BENCH_CHUNK_MS', 100, 5));
const STRICT = process.env.BENCH_STRICT === '1';
/** Scheduling priority (nice, -20..19) for this process and the children; negative needs root. */
const NICE = process.env.BENCH_NICE ? Math.floor(envNumber('BENCH_NICE', 0, -20)) : undefined;
/** Token chunks per stream; the `done` line follows them. */
const CHUNKS = Math.max(1, Math.round((HOLD_S * 1000) / CHUNK_MS));

const MAX_TTFB_OVERHEAD_MS = 1;
const MAX_RSS_MB = 300;

const bodyFor = (chunks: number): string =>
  JSON.stringify({ model: 'm', prompt: 'Count slowly.', stream: true, options: { num_predict: chunks } });

// ---------------------------------------------------------------------------------------------
// Child processes: tracked so they die with us, whatever happens.

const children = new Set<ChildProcess>();

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(t);
}

const stopAll = (): Promise<unknown> => Promise.all([...children].map((c) => stopChild(c)));

process.on('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(BUILD, { recursive: true, force: true });
});
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.once(sig, () => {
    console.error(`\n${sig}: stopping children`);
    stopAll()
      .catch((err: unknown) => console.error(err))
      .finally(() => process.exit(130));
  });

/** Start a compiled child on bare node; resolves with its pid and the URLs it reports ready. */
async function startChild(
  script: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ pid: number; urls: readonly string[] }> {
  const child = fork(join(BUILD, 'bench', script), [...args], {
    cwd: ROOT,
    env,
    execArgv: [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const urls = await new Promise<readonly string[]>((resolveReady, reject) => {
    const timer = setTimeout(() => done(new Error(`${script} not ready after 30 s`)), 30_000);
    const onMessage = (m: unknown): void => {
      if (isReadyMessage(m)) done(undefined, m.urls);
    };
    const onExit = (code: number | null): void => done(new Error(`${script} exited (${code}) before ready`));
    function done(err: Error | undefined, got?: readonly string[]): void {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
      if (err) reject(err);
      else resolveReady(got ?? []);
    }
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
  if (child.pid === undefined || urls.length === 0) throw new Error(`${script} reported no pid or URL`);
  return { pid: child.pid, urls };
}

// ---------------------------------------------------------------------------------------------
// /proc readings

const CLK_TCK = ((): number => {
  const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 2000 });
  const n = Number(r.stdout?.trim());
  return Number.isFinite(n) && n > 0 ? n : 100;
})();

/** User + system CPU seconds a process has used so far; NaN when unreadable. */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After "pid (comm) ", utime and stime are fields 14 and 15 of the line.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLK_TCK;
  } catch {
    return NaN;
  }
}

/**
 * Seconds a process's main thread has run and has waited runnable for a core so far
 * (/proc/PID/task/PID/schedstat): a wait far above the run time means the cores were busy with
 * other work, and every hop through another process pays that wait again. NaN when unreadable.
 */
function schedSeconds(pid: number): { run: number; wait: number } {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ');
    return { run: Number(run) / 1e9, wait: Number(wait) / 1e9 };
  } catch {
    return { run: NaN, wait: NaN };
  }
}

/** Resident set size in MB (VmRSS); NaN when unreadable. */
function rssMb(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** The soft limit on open files a child of ours gets (what llmlb and the upstreams run with). */
function openFileLimit(): number {
  const r = spawnSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8', timeout: 2000 });
  const out = r.stdout?.trim() ?? '';
  return out === 'unlimited' ? Infinity : Number(out);
}

// ---------------------------------------------------------------------------------------------
// HTTP reads of the children's state

async function getJson(url: string, headers: Record<string, string> = {}): Promise<unknown> {
  const r = await request(url, { headers, headersTimeout: 5000, bodyTimeout: 5000 });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`GET ${url} answered ${r.statusCode}: ${text.slice(0, 200)}`);
  return JSON.parse(text) as unknown;
}

/** Streams the upstream process holds now and at most since the last reset. */
async function upstreamStats(url: string, reset = false): Promise<{ active: number; peak: number }> {
  const o = (await getJson(`${url}/bench/stats${reset ? '?reset=1' : ''}`)) as {
    active: number;
    peak: number;
  };
  return { active: o.active, peak: o.peak };
}

/** llmlb's in-flight count summed over its backends (GET /admin/backends). */
async function adminInFlight(routerUrl: string): Promise<number> {
  const o = (await getJson(`${routerUrl}/admin/backends`, { authorization: `Bearer ${ADMIN_TOKEN}` })) as {
    backends: { inFlight: number }[];
  };
  return o.backends.reduce((a, b) => a + b.inFlight, 0);
}

/** llmlb's `llmlb_backend_in_flight` gauge summed over backends (GET /metrics). */
async function metricsInFlight(routerUrl: string): Promise<number> {
  const r = await request(`${routerUrl}/metrics`, { headersTimeout: 5000, bodyTimeout: 5000 });
  const text = await r.body.text();
  let sum = 0;
  for (const m of text.matchAll(/^llmlb_backend_in_flight(?:\{[^}]*\})?\s+(\S+)$/gm)) sum += Number(m[1]);
  return sum;
}

// ---------------------------------------------------------------------------------------------
// One stream

interface StreamResult {
  /** ms from dispatch to the first body byte; NaN when none came. */
  ttfbMs: number;
  /** ms from dispatch to the end of the answer. */
  totalMs: number;
  ok: boolean;
  /** Why it failed: HTTP status, error code, or a short description. */
  failure: string | undefined;
}

const NEWLINE = 0x0a;
const DONE_MARK = '"done":true';

/**
 * One streamed POST /api/generate on `pool`, through undici's dispatch (no Readable per stream:
 * 1,000 of them at ten chunks a second would make the client the bottleneck).
 */
function openStream(pool: Pool, body: string, lines: number): Promise<StreamResult> {
  return new Promise((resolveStream) => {
    const t0 = performance.now();
    let ttfb = NaN;
    let status = 0;
    let seen = 0;
    let tail = '';
    let settled = false;
    const settle = (failure: string | undefined): void => {
      if (settled) return;
      settled = true;
      resolveStream({ ttfbMs: ttfb, totalMs: performance.now() - t0, ok: failure === undefined, failure });
    };
    // undici's callback handler interface (as llmlb's own upstream exchange uses): the controller
    // interface would parse every answer's headers into an object on top.
    const handler: Dispatcher.DispatchHandler = {
      onConnect() {},
      onHeaders(statusCode) {
        status = statusCode;
        return true;
      },
      onData(chunk) {
        if (Number.isNaN(ttfb)) ttfb = performance.now() - t0;
        for (let i = chunk.indexOf(NEWLINE); i !== -1; i = chunk.indexOf(NEWLINE, i + 1)) seen++;
        // The last line is the `done` one: keep just enough of the end to see it.
        tail = (tail + chunk.toString('latin1')).slice(-400);
        return true;
      },
      onComplete() {
        if (status !== 200) return settle(`HTTP ${status}`);
        if (seen !== lines) return settle(`${seen} of ${lines} lines`);
        const last = tail.trimEnd().split('\n').pop() ?? '';
        settle(last.includes(DONE_MARK) ? undefined : 'no done line');
      },
      onError(err) {
        const code = (err as { code?: unknown }).code;
        settle(typeof code === 'string' ? code : err.message.slice(0, 60));
      },
    };
    pool.dispatch(
      {
        path: '/api/generate',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        headersTimeout: 30_000,
        bodyTimeout: 30_000,
      },
      handler,
    );
  });
}

// ---------------------------------------------------------------------------------------------
// One phase

interface Sched {
  readonly run: number;
  readonly wait: number;
}

interface Sample {
  readonly t: number;
  /** Main threads' run and run-queue wait so far: the watched process (llmlb), upstreams, client. */
  readonly watchedSched: Sched;
  readonly upstreamSched: Sched;
  readonly clientSched: Sched;
  readonly open: number;
  readonly rssMb: number;
  readonly watchedCpuS: number;
  readonly upstreamCpuS: number;
  readonly clientCpuS: number;
}

interface PhaseResult {
  readonly name: string;
  readonly results: readonly StreamResult[];
  readonly samples: readonly Sample[];
  /** The window (ms, performance.now) every stream was open: last one dispatched → first one due to end. */
  readonly allOpenAt: number;
  readonly holdEndAt: number;
  /** When the first stream actually ended (a failure included). */
  readonly firstEndAt: number;
  /** Mid-hold readings: streams open at the upstreams, llmlb's in-flight (phase B). */
  readonly upstreamActiveMid: number;
  readonly upstreamPeak: number;
  readonly inFlightMid: number | null;
  readonly wallS: number;
  /** The machine's 1-minute load average when the phase began (other work shares the cores). */
  readonly loadAvg: number;
}

const clientCpuS = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

/**
 * Open STREAMS streams to `origins` (spread evenly) at an even rate over the ramp, hold each
 * to its end, sample the watched process (llmlb in phase B), and wait for all to finish.
 */
async function runPhase(
  name: string,
  origins: readonly string[],
  upstreamUrl: string,
  upstreamPid: number,
  watchedPid: number | undefined,
  routerUrl: string | undefined,
): Promise<PhaseResult> {
  const per = Math.ceil(STREAMS / origins.length);
  const pools = origins.map(
    (o) =>
      new Pool(o, {
        connections: per,
        pipelining: 1,
        connect: { timeout: 10_000 },
        keepAliveTimeout: 10_000,
      }),
  );
  const body = bodyFor(CHUNKS);
  const lines = CHUNKS + 1;
  await upstreamStats(upstreamUrl, true);
  const load = loadavg()[0] ?? NaN;
  const results: StreamResult[] = [];
  let open = 0;
  let firstEndAt = Infinity;
  const samples: Sample[] = [];
  const sample = (): void => {
    samples.push({
      t: performance.now(),
      watchedSched: watchedPid === undefined ? { run: NaN, wait: NaN } : schedSeconds(watchedPid),
      upstreamSched: schedSeconds(upstreamPid),
      clientSched: schedSeconds(process.pid),
      open,
      rssMb: watchedPid === undefined ? NaN : rssMb(watchedPid),
      watchedCpuS: watchedPid === undefined ? NaN : cpuSeconds(watchedPid),
      upstreamCpuS: cpuSeconds(upstreamPid),
      clientCpuS: clientCpuS(),
    });
  };
  sample();
  const sampler = setInterval(sample, 250);
  const t0 = performance.now();
  const pending: Promise<void>[] = [];
  try {
    const rampMs = RAMP_S * 1000;
    for (let i = 0; i < STREAMS; i++) {
      // Even arrivals: wait for this stream's slot (timers drift; the schedule does not).
      const due = t0 + (STREAMS > 1 ? (i * rampMs) / (STREAMS - 1) : 0);
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait);
      open++;
      pending.push(
        openStream(pools[i % pools.length]!, body, lines).then((r) => {
          open--;
          if (firstEndAt === Infinity) firstEndAt = performance.now();
          results.push(r);
        }),
      );
    }
    const allOpenAt = performance.now();
    sample();
    // Mid-hold: what reached the upstreams, and what llmlb counts in flight.
    const holdLeftMs = t0 + HOLD_S * 1000 - performance.now();
    await sleep(Math.max(0, holdLeftMs / 2));
    const mid = await upstreamStats(upstreamUrl);
    const inFlightMid = routerUrl === undefined ? null : await adminInFlight(routerUrl);
    // Every stream has its own deadline (bodyTimeout); this bounds the phase as a whole.
    const deadlineMs = (RAMP_S + HOLD_S + 20) * 1000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      Promise.all(pending).then(() => false),
      new Promise<boolean>((r) => {
        timer = setTimeout(() => r(true), Math.max(0, t0 + deadlineMs - performance.now()));
      }),
    ]);
    clearTimeout(timer);
    if (timedOut)
      console.log(`${name}: ${open} stream(s) still open at the phase deadline; counted as failed`);
    const after = await upstreamStats(upstreamUrl);
    return {
      name,
      results: [
        ...results,
        ...Array.from({ length: STREAMS - results.length }, () => ({
          ttfbMs: NaN,
          totalMs: NaN,
          ok: false,
          failure: 'not finished by the phase deadline',
        })),
      ],
      samples,
      allOpenAt,
      holdEndAt: t0 + CHUNKS * CHUNK_MS,
      firstEndAt,
      upstreamActiveMid: mid.active,
      upstreamPeak: after.peak,
      inFlightMid,
      wallS: (performance.now() - t0) / 1000,
      loadAvg: load,
    };
  } finally {
    clearInterval(sampler);
    await Promise.all(pools.map((p) => p.destroy().catch(() => undefined)));
  }
}

/** A few short streams first, so neither side is measured cold. */
async function warmUp(origins: readonly string[]): Promise<void> {
  const pools = origins.map((o) => new Pool(o, { connections: 16, pipelining: 1 }));
  try {
    const body = bodyFor(2);
    for (let round = 0; round < 10; round++) {
      const rs = await Promise.all(
        Array.from({ length: 20 }, (_, i) => openStream(pools[i % pools.length]!, body, 3)),
      );
      const bad = rs.find((r) => !r.ok);
      if (bad) throw new Error(`warm-up stream to ${origins.join(', ')} failed: ${bad.failure ?? '?'}`);
    }
  } finally {
    await Promise.all(pools.map((p) => p.close().catch(() => undefined)));
  }
}

// ---------------------------------------------------------------------------------------------
// Report

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '-');
const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '-');
const n0 = (x: number): string => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '-');

function table(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]): string =>
    r.map((c, i) => (i === 0 ? c.padEnd(w[i]!) : c.padStart(w[i]!))).join('  ');
  return [line(head), w.map((n) => '-'.repeat(n)).join('  '), ...rows.map(line)].join('\n');
}

interface PhaseSummary {
  readonly completed: number;
  readonly failed: number;
  readonly failures: Record<string, number>;
  readonly ttfb: { p50: number; p90: number; p99: number; max: number };
  /** Stream length beyond its nominal HOLD_S, p99 (ms): chunks held back on the way. */
  readonly lateP99Ms: number;
  /** While every stream was open (last dispatched → first due to end). */
  readonly hold: {
    readonly seconds: number;
    readonly watchedCpuPct: number;
    readonly upstreamCpuPct: number;
    readonly clientCpuPct: number;
  };
  readonly peakRssMb: number;
  readonly peakOpen: number;
  /**
   * While streams were being opened (when TTFB is measured): seconds each main thread ran and
   * waited for a core, per second of wall time.
   */
  readonly ramp: {
    readonly watched: Sched;
    readonly upstream: Sched;
    readonly client: Sched;
  };
}

function summarize(p: PhaseResult): PhaseSummary {
  const failures: Record<string, number> = Object.create(null) as Record<string, number>;
  for (const r of p.results) if (!r.ok) failures[r.failure ?? '?'] = (failures[r.failure ?? '?'] ?? 0) + 1;
  const ttfb = p.results
    .map((r) => r.ttfbMs)
    .filter((x) => Number.isFinite(x))
    .sort((a, b) => a - b);
  const late = p.results
    .filter((r) => r.ok)
    .map((r) => r.totalMs - CHUNKS * CHUNK_MS)
    .sort((a, b) => a - b);
  const inHold = p.samples.filter((s) => s.t >= p.allOpenAt && s.t <= p.holdEndAt);
  const first = inHold[0];
  const last = inHold[inHold.length - 1];
  const pctOf = (k: 'watchedCpuS' | 'upstreamCpuS' | 'clientCpuS'): number =>
    first && last && last.t > first.t ? ((last[k] - first[k]) / ((last.t - first.t) / 1000)) * 100 : NaN;
  const completed = p.results.filter((r) => r.ok).length;
  const r0 = p.samples[0];
  const r1 = p.samples.find((s) => s.t >= p.allOpenAt);
  const perS = (k: 'watchedSched' | 'upstreamSched' | 'clientSched'): Sched => {
    if (!r0 || !r1 || r1.t <= r0.t) return { run: NaN, wait: NaN };
    const w = (r1.t - r0.t) / 1000;
    return { run: (r1[k].run - r0[k].run) / w, wait: (r1[k].wait - r0[k].wait) / w };
  };
  return {
    completed,
    failed: p.results.length - completed,
    failures,
    ttfb: {
      p50: quantile(ttfb, 0.5),
      p90: quantile(ttfb, 0.9),
      p99: quantile(ttfb, 0.99),
      max: ttfb[ttfb.length - 1] ?? NaN,
    },
    lateP99Ms: quantile(late, 0.99),
    hold: {
      seconds: first && last ? (last.t - first.t) / 1000 : 0,
      watchedCpuPct: pctOf('watchedCpuS'),
      upstreamCpuPct: pctOf('upstreamCpuS'),
      clientCpuPct: pctOf('clientCpuS'),
    },
    peakRssMb: p.samples.reduce((m, s) => (Number.isFinite(s.rssMb) && !(s.rssMb <= m) ? s.rssMb : m), NaN),
    peakOpen: Math.max(...p.samples.map((s) => s.open)),
    ramp: { watched: perS('watchedSched'), upstream: perS('upstreamSched'), client: perS('clientSched') },
  };
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const started = Date.now();
  const expectedS = 2 * (RAMP_S + HOLD_S) + 15;
  // Whatever hangs, the bench ends (children killed) well after its expected length.
  const limitS = Math.round(expectedS * 1.5 + 60);
  const watchdog = setTimeout(() => {
    console.error(`bench:streams: watchdog — still running after ${limitS} s; stopping`);
    stopAll()
      .catch((err: unknown) => console.error(err))
      .finally(() => process.exit(2));
  }, limitS * 1000);
  watchdog.unref();

  const limit = openFileLimit();
  // llmlb holds two sockets per stream (client and upstream side), the others one.
  const needed = 2 * STREAMS + 256;
  if (!(limit >= needed))
    throw new Error(
      `ulimit -n is ${limit}; ${STREAMS} streams need ≥ ${needed}: raise it (ulimit -n ${needed})`,
    );

  console.log(
    `bench:streams — ${cpus().length} CPU(s) (${cpus()[0]?.model.trim() ?? '?'}), node ${process.version}, ` +
      `ulimit -n ${limit}; ${STREAMS} streams over ${UPSTREAMS} upstream(s), opened over ${RAMP_S} s, ` +
      `each a chunk every ${CHUNK_MS} ms for ${HOLD_S} s; ~${Math.round(expectedS)} s` +
      (NICE === undefined ? '' : `; nice ${NICE}`),
  );
  try {
    await compileForBench(ROOT, BUILD);
    const up = await startChild('stream-upstream-child.js', [
      String(UPSTREAMS),
      String(CHUNK_MS),
      String(CHUNKS),
    ]);
    const router = await startChild('streams-router-child.js', up.urls, {
      ...process.env,
      BENCH_ADMIN_TOKEN: ADMIN_TOKEN,
    });
    const routerUrl = router.urls[0]!;
    if (NICE !== undefined)
      for (const pid of [process.pid, up.pid, router.pid]) {
        try {
          setPriority(pid, NICE);
        } catch (err) {
          throw new Error(`BENCH_NICE=${NICE}: cannot set priority (${(err as Error).message})`);
        }
      }
    // The router takes a backend once its first probe answered.
    const readyBy = Date.now() + 10_000;
    while (Date.now() < readyBy) {
      const o = (await getJson(`${routerUrl}/admin/backends`, {
        authorization: `Bearer ${ADMIN_TOKEN}`,
      })) as {
        backends: { healthy: boolean }[];
      };
      if (o.backends.length === UPSTREAMS && o.backends.every((b) => b.healthy)) break;
      await sleep(100);
    }
    await warmUp(up.urls);
    await warmUp([routerUrl]);
    const rssIdle = rssMb(router.pid);

    const direct = await runPhase('direct', up.urls, up.urls[0]!, up.pid, undefined, undefined);
    const viaLb = await runPhase('llmlb', [routerUrl], up.urls[0]!, up.pid, router.pid, routerUrl);

    // In flight back to 0: llmlb counts a stream out when its last byte went; allow a moment.
    let inFlightAfter = NaN;
    const settleBy = Date.now() + 5000;
    while (Date.now() < settleBy) {
      inFlightAfter = await adminInFlight(routerUrl);
      if (inFlightAfter === 0) break;
      await sleep(100);
    }
    const gaugeAfter = await metricsInFlight(routerUrl);
    const rssAfter = rssMb(router.pid);

    const d = summarize(direct);
    const l = summarize(viaLb);
    console.log(
      `\n${STREAMS} streams (Ollama /api/generate, stream: true), TTFB = request dispatched → first body byte`,
    );
    console.log(
      table(
        [
          'target',
          'completed',
          'failed',
          'TTFB p50 ms',
          'p90 ms',
          'p99 ms',
          'max ms',
          'end late p99 ms',
          'open at upstreams',
          'llmlb in flight',
          'load avg',
        ],
        [
          [direct, d],
          [viaLb, l],
        ].map(([p, s]) => {
          const ph = p as PhaseResult;
          const su = s as PhaseSummary;
          return [
            ph.name,
            n0(su.completed),
            n0(su.failed),
            f2(su.ttfb.p50),
            f2(su.ttfb.p90),
            f2(su.ttfb.p99),
            f1(su.ttfb.max),
            f1(su.lateP99Ms),
            `${n0(ph.upstreamActiveMid)} (peak ${n0(ph.upstreamPeak)})`,
            ph.inFlightMid === null ? '-' : n0(ph.inFlightMid),
            f1(ph.loadAvg),
          ];
        }),
      ),
    );
    for (const [name, s] of [
      ['direct', d],
      ['llmlb', l],
    ] as const)
      if (s.failed > 0)
        console.log(
          `${name} failures: ${Object.entries(s.failures)
            .map(([k, v]) => `${k} × ${v}`)
            .join(', ')}`,
        );

    console.log(`\nWhile all ${STREAMS} streams were open (${f1(l.hold.seconds)} s in phase llmlb):`);
    console.log(
      table(
        ['process', 'CPU % of a core', 'RSS MB'],
        [
          [
            'llmlb',
            f1(l.hold.watchedCpuPct),
            `peak ${f1(l.peakRssMb)} (idle ${f1(rssIdle)}, after ${f1(rssAfter)})`,
          ],
          ['upstreams', f1(l.hold.upstreamCpuPct), '-'],
          ['client (this process)', f1(l.hold.clientCpuPct), '-'],
        ],
      ),
    );
    console.log(
      `direct phase, same window: upstreams ${f1(d.hold.upstreamCpuPct)} %, client ${f1(d.hold.clientCpuPct)} % of a core`,
    );
    const pc = (x: number): string => f1(x * 100);
    console.log(
      `\nWhile streams were being opened (TTFB measured): main threads' run time and time spent waiting for a core, % of wall time`,
    );
    console.log(
      table(
        ['process', 'direct: run %', 'wait %', 'llmlb: run %', 'wait %'],
        [
          ['llmlb', '-', '-', pc(l.ramp.watched.run), pc(l.ramp.watched.wait)],
          [
            'upstreams',
            pc(d.ramp.upstream.run),
            pc(d.ramp.upstream.wait),
            pc(l.ramp.upstream.run),
            pc(l.ramp.upstream.wait),
          ],
          [
            'client (this process)',
            pc(d.ramp.client.run),
            pc(d.ramp.client.wait),
            pc(l.ramp.client.run),
            pc(l.ramp.client.wait),
          ],
        ],
      ),
    );
    console.log(
      `llmlb in flight after: ${n0(inFlightAfter)} (/admin/backends), ${n0(gaugeAfter)} (/metrics)`,
    );

    const overhead = l.ttfb.p50 - d.ttfb.p50;
    const checks = [
      {
        check: 'TTFB overhead p50 (llmlb − direct)',
        value: `${f2(overhead)} ms`,
        target: `≤ ${MAX_TTFB_OVERHEAD_MS} ms`,
        pass: overhead <= MAX_TTFB_OVERHEAD_MS,
      },
      {
        check: `llmlb peak RSS holding ${STREAMS} streams`,
        value: `${f1(l.peakRssMb)} MB`,
        target: `≤ ${MAX_RSS_MB} MB`,
        pass: l.peakRssMb <= MAX_RSS_MB,
      },
      {
        check: 'streams completed through llmlb',
        value: `${n0(l.completed)} / ${n0(STREAMS)}`,
        target: 'all',
        pass: l.completed === STREAMS && d.completed === STREAMS,
      },
      {
        check: 'llmlb in flight back to 0',
        value: `${n0(inFlightAfter)} / ${n0(gaugeAfter)}`,
        target: '0',
        pass: inFlightAfter === 0 && gaugeAfter === 0,
      },
    ];
    console.log('\nTargets');
    console.log(
      table(
        ['check', 'value', 'target', 'result'],
        checks.map((c) => [c.check, c.value, c.target, c.pass ? 'PASS' : 'FAIL']),
      ),
    );

    const out = {
      at: new Date().toISOString(),
      machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model.trim() ?? null, node: process.version },
      config: {
        streams: STREAMS,
        upstreams: UPSTREAMS,
        rampS: RAMP_S,
        holdS: HOLD_S,
        chunkMs: CHUNK_MS,
        chunks: CHUNKS,
        openFileLimit: limit,
        nice: NICE ?? null,
      },
      direct: {
        ...d,
        upstreamActiveMid: direct.upstreamActiveMid,
        upstreamPeak: direct.upstreamPeak,
        loadAvg: direct.loadAvg,
      },
      llmlb: {
        ...l,
        upstreamActiveMid: viaLb.upstreamActiveMid,
        upstreamPeak: viaLb.upstreamPeak,
        inFlightMid: viaLb.inFlightMid,
        loadAvg: viaLb.loadAvg,
        rssIdleMb: rssIdle,
        rssAfterMb: rssAfter,
        inFlightAfter,
        gaugeInFlightAfter: gaugeAfter,
      },
      ttfbOverheadP50Ms: overhead,
      checks,
      elapsedS: (Date.now() - started) / 1000,
    };
    const outDir = join(ROOT, 'bench-out');
    await mkdir(outDir, { recursive: true });
    await writeFile(join(outDir, 'streams.json'), JSON.stringify(out, null, 2) + '\n');
    console.log(`\nwrote bench-out/streams.json (${out.elapsedS.toFixed(0)} s)`);
    if (STRICT && checks.some((c) => !c.pass)) process.exitCode = 1;
  } finally {
    await stopAll();
    await rm(BUILD, { recursive: true, force: true });
    clearTimeout(watchdog);
  }
}

main().catch(async (err: unknown) => {
  console.error('bench:streams failed:', err instanceof Error ? err.message : err);
  await stopAll();
  process.exit(1);
});
