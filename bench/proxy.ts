/**
 * `npm run bench:proxy`: what llmlb's proxy path costs on this machine, against the same trivial
 * upstreams reached (a) directly, (b) through llmlb least-connections over two of them, (c)
 * through HAProxy leastconn over the same two (skipped, and said so, when `haproxy` is absent),
 * and (d) through a minimal node:http + undici proxy (Node's own floor, for reference).
 *
 * Throughput and latency under load come from autocannon (in this process); the upstreams,
 * llmlb and the minimal proxy each run in their own child process on bare node (src/ compiled
 * first, see build.ts), HAProxy as `haproxy -db` with one thread. Client, proxy and upstreams
 * share the machine's cores, so absolute req/s move with whatever else the host runs: the
 * ratios are taken within each round (every target once, order reversed every other round)
 * and their median reported with the spread. Each proxy's CPU time per request (from
 * /proc/PID/stat) is reported beside: it depends far less on scheduling noise. Last, the
 * latency each proxy adds to sequential requests on one keep-alive connection.
 *
 * All traffic stays on 127.0.0.1; every phase is bounded in time (and a watchdog bounds the
 * whole); children are killed on any exit. The JSON summary goes to bench-out/proxy.json.
 *
 * Knobs (environment): BENCH_CONNECTIONS (32), BENCH_DURATION s (5), BENCH_WARMUP s (1),
 * BENCH_ROUNDS (5), BENCH_SEQ (2000 sequential requests per target), BENCH_TARGETS
 * (direct,llmlb,haproxy,node-min; add llmlb-info for a second llmlb that logs every request at
 * info, to /dev/null, measured in the same rounds; llmlb-capture for one writing the trace capture
 * of every request), HAPROXY_BIN (haproxy), BENCH_CPU_PROF=dir (run the llmlb
 * child under `node --cpu-prof`; summarize with bench/profile-summary.ts), BENCH_LLMLB_NODE_FLAGS
 * (extra node flags for the llmlb child, e.g. `--max-semi-space-size=32`), BENCH_LLMLB_LOG=info
 * (llmlb logs at that level, to /dev/null: the per-request line costs; default silent), BENCH_STRICT=1
 * (exit 1 when a target FAILs or requests failed), BENCH_BASE=REV (adds target llmlb-base: the llmlb
 * of git revision REV, exported with `git archive` and compiled the same way, measured in the same
 * rounds — how a refactor shows "same req/s within noise" against the code before it),
 * BENCH_WORKERS=N (adds target llmlb-workers: `llmlb serve --workers N` through the compiled CLI,
 * same policy and upstreams, measured in the same rounds as `llmlb` — the one-process router —
 * with its CPU summed over the primary and its workers; `auto` = one per core).
 */
import autocannon from 'autocannon';
import { fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, request } from 'undici';
import { percentile as quantile } from '../src/report/stats.js';
import { formatTable as table } from '../src/report/table.js';
import { compileForBench, exportRevision } from './build.js';
import { envNumber, GENERATE_ANSWER, GENERATE_BODY, isReadyMessage } from './common.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const HOST = '127.0.0.1';
/** Where the children run from: src/ and bench/*-child.ts compiled to JavaScript (see build.ts). */
const BUILD = join(ROOT, 'bench-out', '.build');

const CONNECTIONS = Math.floor(envNumber('BENCH_CONNECTIONS', 32, 1));
const DURATION_S = envNumber('BENCH_DURATION', 5, 1);
const WARMUP_S = envNumber('BENCH_WARMUP', 1, 0);
const ROUNDS = Math.floor(envNumber('BENCH_ROUNDS', 5, 1));
const SEQ_N = Math.floor(envNumber('BENCH_SEQ', 2000, 100));
const SEQ_WARMUP = 200;
const SEQ_BLOCKS = 4;
const HAPROXY_BIN = process.env.HAPROXY_BIN ?? 'haproxy';
const PROF_DIR = process.env.BENCH_CPU_PROF;
/** Extra node flags for the llmlb child only (e.g. --max-semi-space-size=32), to compare runtimes. */
const LLMLB_NODE_FLAGS = (process.env.BENCH_LLMLB_NODE_FLAGS ?? '').split(' ').filter((f) => f !== '');
const STRICT = process.env.BENCH_STRICT === '1';

/** Targets: llmlb ≥ 50% of HAProxy's req/s; llmlb adds ≤ 0.3 ms at p50 to sequential requests. */
const MIN_RATIO_VS_HAPROXY = 0.5;
const MAX_ADDED_P50_MS = 0.3;

type TargetName =
  | 'direct'
  | 'llmlb'
  | 'llmlb-workers'
  | 'llmlb-base'
  | 'llmlb-info'
  | 'llmlb-capture'
  | 'haproxy'
  | 'node-min';
const ALL_TARGETS: readonly TargetName[] = [
  'direct',
  'llmlb',
  'llmlb-workers',
  'llmlb-base',
  'llmlb-info',
  'llmlb-capture',
  'haproxy',
  'node-min',
];
/** `llmlb-info` (llmlb logging every request at info, as an operator runs it) only when asked for. */
const DEFAULT_TARGETS: readonly TargetName[] = ['direct', 'llmlb', 'haproxy', 'node-min'];
const LABEL: Record<TargetName, string> = {
  direct: 'direct (1 upstream)',
  llmlb: 'llmlb least-connections',
  'llmlb-workers': `llmlb --workers ${process.env.BENCH_WORKERS ?? '2'}`,
  'llmlb-base': `llmlb @ ${(process.env.BENCH_BASE ?? 'base').slice(0, 12)}`,
  'llmlb-info': 'llmlb, info log per req',
  'llmlb-capture': 'llmlb, trace capture on',
  haproxy: 'HAProxy leastconn',
  'node-min': 'node:http+undici minimal',
};

const BASE_REV = process.env.BENCH_BASE;
/** BENCH_WORKERS: the worker count of target llmlb-workers (`auto`: one per core). */
const BENCH_WORKERS =
  process.env.BENCH_WORKERS === 'auto' ? cpus().length : Math.floor(envNumber('BENCH_WORKERS', 2, 1));
/** Where the base revision's src/ and bench children are compiled (under ROOT: node_modules resolve). */
const BASE_BUILD = join(ROOT, 'bench-out', '.build-base');

function selectedTargets(): TargetName[] {
  const raw = process.env.BENCH_TARGETS;
  const workers: TargetName[] = process.env.BENCH_WORKERS ? ['llmlb-workers'] : [];
  if (!raw)
    return BASE_REV
      ? ['direct', 'llmlb', ...workers, 'llmlb-base', 'haproxy', 'node-min']
      : ALL_TARGETS.filter((t) => DEFAULT_TARGETS.includes(t) || workers.includes(t));
  const names = raw.split(',').map((s) => s.trim());
  for (const n of names)
    if (!ALL_TARGETS.includes(n as TargetName)) throw new Error(`BENCH_TARGETS: unknown target '${n}'`);
  if (names.includes('llmlb-base') && !BASE_REV)
    throw new Error('target llmlb-base needs BENCH_BASE=<git revision>');
  return ALL_TARGETS.filter((t) => names.includes(t));
}

// ---------------------------------------------------------------------------------------------
// Child processes: tracked so they die with us, whatever happens.

const children = new Set<ChildProcess>();

function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(t);
}

async function stopAll(): Promise<void> {
  await Promise.all([...children].map((c) => stopChild(c)));
}

/** Scratch directories (HAProxy config, compiled children) removed however the run ends. */
const scratch = new Set<string>();

// Last resort (an uncaught error, a signal, process.exit elsewhere): no waiting possible, so SIGKILL.
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of scratch) rmSync(d, { recursive: true, force: true });
});
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    console.error(`\n${sig}: stopping children`);
    stopAll()
      .catch((err: unknown) => console.error(err))
      .finally(() => process.exit(130));
  });
}

interface Started {
  readonly url: string;
  readonly pid: number | undefined;
}

/** Start a compiled child script on bare node and wait for its `ready` message with its URLs. */
async function startNodeChild(
  script: string,
  args: readonly string[],
  extraExecArgv: readonly string[] = [],
  env: NodeJS.ProcessEnv = process.env,
  build: string = BUILD,
): Promise<{ child: ChildProcess; urls: readonly string[] }> {
  const child = track(
    fork(join(build, 'bench', script), [...args], {
      cwd: ROOT,
      env,
      execArgv: [...extraExecArgv],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
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
  return { child, urls };
}

async function startProxyChild(
  script: string,
  upstreams: readonly string[],
  execArgv: readonly string[] = [],
  env?: NodeJS.ProcessEnv,
  build?: string,
): Promise<Started> {
  const { child, urls } = await startNodeChild(script, upstreams, execArgv, env, build);
  const url = urls[0];
  if (url === undefined) throw new Error(`${script} reported no URL`);
  return { url, pid: child.pid };
}

/** Export `rev`'s src/ and bench/ with `git archive` into `dir` and compile them into BASE_BUILD. */
async function compileBase(rev: string, dir: string): Promise<void> {
  await exportRevision(ROOT, rev, dir);
  await compileForBench(dir, BASE_BUILD);
}

// ---------------------------------------------------------------------------------------------
// HAProxy

function haproxyVersion(): string | undefined {
  const r = spawnSync(HAPROXY_BIN, ['-v'], { encoding: 'utf8', timeout: 5000 });
  if (r.error || r.status !== 0) return undefined;
  return /version\s+(\S+)/i.exec(r.stdout)?.[1] ?? r.stdout.split('\n')[0]?.trim();
}

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, HOST, () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolvePort(port));
    });
  });
}

async function startHaproxy(upstreams: readonly string[], dir: string): Promise<Started> {
  const port = await freePort();
  const cfg = [
    'global',
    '  nbthread 1',
    '  maxconn 4096',
    'defaults',
    '  mode http',
    '  option http-keep-alive',
    '  timeout connect 5s',
    '  timeout client 60s',
    '  timeout server 60s',
    '  timeout http-keep-alive 60s',
    'frontend fe',
    `  bind ${HOST}:${port}`,
    '  default_backend be',
    'backend be',
    '  balance leastconn',
    ...upstreams.map((u, i) => `  server u${i} ${new URL(u).host}`),
    '',
  ].join('\n');
  const file = join(dir, 'haproxy.cfg');
  await writeFile(file, cfg);
  const child = track(spawn(HAPROXY_BIN, ['-db', '-f', file], { stdio: ['ignore', 'ignore', 'pipe'] }));
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString()).slice(-4000);
  });
  const url = `http://${HOST}:${port}`;
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`haproxy exited (${child.exitCode}): ${stderr.trim()}`);
    try {
      const r = await request(`${url}/api/version`, { headersTimeout: 1000, bodyTimeout: 1000 });
      await r.body.dump();
      if (r.statusCode === 200) return { url, pid: child.pid };
    } catch {
      // not listening yet
    }
    await sleep(50);
  }
  throw new Error(`haproxy not answering on ${url} after 10 s: ${stderr.trim()}`);
}

// ---------------------------------------------------------------------------------------------
// Measurements

const CLK_TCK = ((): number => {
  const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 2000 });
  const n = Number(r.stdout?.trim());
  return Number.isFinite(n) && n > 0 ? n : 100;
})();

/**
 * User + system CPU seconds a process and its live children (a cluster primary's workers) have
 * used so far (Linux /proc); undefined elsewhere.
 */
function cpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after "pid (comm) ": state is field 3; utime and stime are fields 14 and 15.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    let s = (Number(f[11]) + Number(f[12])) / CLK_TCK;
    let kids: string[] = [];
    try {
      kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ');
    } catch {
      // no children file: count the process alone
    }
    for (const k of kids) if (k !== '') s += cpuSeconds(Number(k)) ?? 0;
    return s;
  } catch {
    return undefined;
  }
}

/** `llmlb serve --workers N` (runServe, compiled like the other children), on the bench's upstreams; its URL from the banner. */
async function startWorkers(upstreams: readonly string[], tmp: string): Promise<Started> {
  const config = join(tmp, 'workers.yaml');
  await writeFile(
    config,
    [
      'server: { host: 127.0.0.1, port: 0, maxBodyBytes: 10485760 }',
      'policy: { name: least-connections }',
      'retry: { attempts: 4, backoffMs: 25 }',
      'timeouts: { connectMs: 5000, firstByteMs: 600000, idleMs: 120000 }',
      'health: { failuresToEject: 3, probeIntervalMs: 5000, probeTimeoutMs: 2000, scrapeIntervalMs: 1000 }',
      'queue: { maxLength: 100000, maxWaitMs: 600000 }',
      'log: { level: silent }',
      'backends:',
      ...upstreams.map(
        (u, i) => `  - { name: ${String.fromCharCode(97 + i)}, url: "${u}", api: ollama, models: [m] }`,
      ),
      '',
    ].join('\n'),
  );
  const child = track(
    spawn(process.execPath, [join(BUILD, 'bench', 'workers-child.js'), config, String(BENCH_WORKERS)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  const url = await new Promise<string>((resolveUrl, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error('llmlb --workers not ready after 30 s')), 30_000);
    child.stdout!.on('data', (d: Buffer) => {
      text += d.toString();
      const m = /llmlb listening on (http:\/\/\S+)\n/.exec(text);
      if (m && /^workers: /m.test(text)) {
        clearTimeout(timer);
        resolveUrl(m[1]!);
      }
    });
    child.once('exit', (code) => reject(new Error(`llmlb --workers exited (${code}): ${text}`)));
  });
  return { url, pid: child.pid };
}

/** One request through a target, checked: a 200 with the upstream's answer, byte for byte. */
async function sanityCheck(name: TargetName, url: string): Promise<void> {
  const r = await request(`${url}/api/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: GENERATE_BODY,
    headersTimeout: 5000,
    bodyTimeout: 5000,
  });
  const text = await r.body.text();
  if (r.statusCode !== 200 || text !== GENERATE_ANSWER)
    throw new Error(`${name}: sanity request answered ${r.statusCode}: ${text.slice(0, 300)}`);
}

interface LoadResult {
  readonly rps: number;
  /** autocannon latencies: 1 ms resolution. */
  readonly p50: number;
  readonly p99: number;
  readonly avgMs: number;
  readonly ok: number;
  readonly errors: number;
  readonly non2xx: number;
  readonly timeouts: number;
  readonly seconds: number;
  /** CPU time per answered request, µs: the proxy process (null for direct) and the upstreams. */
  readonly proxyCpuUs: number | null;
  readonly upstreamCpuUs: number | null;
  /** The load generator (this process: autocannon), µs per answered request. */
  readonly clientCpuUs: number | null;
  /** Whatever else kept the machine's CPUs busy meanwhile (other jobs), µs per answered request. */
  readonly otherCpuUs: number | null;
}

/** CPU seconds the whole machine has been busy (Linux /proc/stat: all but idle and iowait). */
function machineBusySeconds(): number | undefined {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return (total - f[3]! - f[4]!) / CLK_TCK;
  } catch {
    return undefined;
  }
}

async function load(
  url: string,
  seconds: number,
  proxyPid?: number,
  upstreamPid?: number,
): Promise<LoadResult> {
  const p0 = cpuSeconds(proxyPid);
  const u0 = cpuSeconds(upstreamPid);
  const c0 = process.cpuUsage();
  const m0 = machineBusySeconds();
  const r = await autocannon({
    url: `${url}/api/generate`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: GENERATE_BODY,
    connections: CONNECTIONS,
    duration: seconds,
    timeout: 10,
  });
  const p1 = cpuSeconds(proxyPid);
  const u1 = cpuSeconds(upstreamPid);
  const c = process.cpuUsage(c0);
  const m1 = machineBusySeconds();
  const ok = r['2xx'];
  const perReq = (a: number | undefined, b: number | undefined): number | null =>
    a === undefined || b === undefined || ok === 0 ? null : ((b - a) / ok) * 1e6;
  return {
    rps: ok / r.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    avgMs: r.latency.average,
    ok,
    errors: r.errors,
    non2xx: r.non2xx,
    timeouts: r.timeouts,
    seconds: r.duration,
    proxyCpuUs: perReq(p0, p1),
    upstreamCpuUs: perReq(u0, u1),
    clientCpuUs: perReq(0, (c.user + c.system) / 1e6),
    otherCpuUs:
      m0 === undefined || m1 === undefined || ok === 0
        ? null
        : Math.max(
            0,
            perReq(m0, m1)! - (perReq(p0, p1) ?? 0) - (perReq(u0, u1) ?? 0) - (c.user + c.system) / ok,
          ),
  };
}

interface SeqStats {
  readonly n: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly mean: number;
}

function seqStats(samples: readonly number[]): SeqStats {
  const s = [...samples].sort((a, b) => a - b);
  return {
    n: s.length,
    p50: quantile(s, 0.5),
    p90: quantile(s, 0.9),
    p99: quantile(s, 0.99),
    mean: s.reduce((a, b) => a + b, 0) / s.length,
  };
}

/** `count` sequential requests on one keep-alive connection; each one's latency in ms. */
async function sequential(client: Client, count: number, out: number[] | undefined): Promise<void> {
  for (let i = 0; i < count; i++) {
    const t0 = process.hrtime.bigint();
    const r = await client.request({
      path: '/api/generate',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: GENERATE_BODY,
      headersTimeout: 5000,
      bodyTimeout: 5000,
    });
    await r.body.arrayBuffer();
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (r.statusCode !== 200) throw new Error(`sequential request answered ${r.statusCode}`);
    out?.push(ms);
  }
}

/**
 * Sequential latency per target, interleaved in blocks (direct, llmlb, …, then back) so that
 * drift on the shared machine hits every target alike.
 */
async function sequentialAll(urls: ReadonlyMap<TargetName, string>): Promise<Map<TargetName, SeqStats>> {
  const clients = new Map<TargetName, Client>();
  const samples = new Map<TargetName, number[]>();
  try {
    for (const [name, url] of urls) {
      const c = new Client(url, { pipelining: 1, keepAliveTimeout: 60_000 });
      clients.set(name, c);
      samples.set(name, []);
      await sequential(c, SEQ_WARMUP, undefined);
    }
    const per = Math.ceil(SEQ_N / SEQ_BLOCKS);
    for (let b = 0; b < SEQ_BLOCKS; b++) {
      const order = [...clients.keys()];
      if (b % 2 === 1) order.reverse();
      for (const name of order) await sequential(clients.get(name)!, per, samples.get(name));
    }
  } finally {
    await Promise.all([...clients.values()].map((c) => c.close().catch(() => undefined)));
  }
  return new Map([...samples].map(([n, s]) => [n, seqStats(s)]));
}

// ---------------------------------------------------------------------------------------------
// Report

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const f0 = (x: number | null): string =>
  x !== null && Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '-';
const f3 = (x: number): string => (Number.isFinite(x) ? x.toFixed(3) : '-');
const pct = (x: number): string => (Number.isFinite(x) ? `${(x * 100).toFixed(1)}%` : '-');

interface Ratio {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

interface Verdict {
  readonly check: string;
  readonly value: number | null;
  readonly target: string;
  readonly result: 'PASS' | 'FAIL' | 'SKIP';
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const wanted = selectedTargets();
  const haVersion = wanted.includes('haproxy') ? haproxyVersion() : undefined;
  const targets = wanted.filter((t) => t !== 'haproxy' || haVersion !== undefined);
  const started = Date.now();
  const estimateS =
    ROUNDS * targets.length * (WARMUP_S + DURATION_S + 0.5) +
    (SEQ_N + SEQ_WARMUP) * targets.length * 0.0006 +
    10;
  // Watchdog: whatever hangs, the bench ends (children killed) well after its expected length.
  const limitS = Math.round(estimateS * 2 + 60);
  const watchdog = setTimeout(() => {
    console.error(`bench:proxy: watchdog — still running after ${limitS} s; stopping`);
    stopAll()
      .catch((err: unknown) => console.error(err))
      .finally(() => process.exit(2));
  }, limitS * 1000);
  watchdog.unref();

  console.log(
    `bench:proxy — ${cpus().length} CPU(s) (${cpus()[0]?.model.trim() ?? '?'}), node ${process.version}; ` +
      `${CONNECTIONS} connections, ${ROUNDS} round(s) of ${DURATION_S} s per target after ${WARMUP_S} s warm-up; ` +
      `${Buffer.byteLength(GENERATE_BODY)}-byte POST /api/generate; ~${Math.round(estimateS)} s`,
  );
  if (wanted.includes('haproxy') && haVersion === undefined)
    console.log(`HAProxy: '${HAPROXY_BIN}' not found — SKIPPING the HAProxy run (apt-get install haproxy).`);
  else if (haVersion !== undefined) console.log(`HAProxy ${haVersion}, nbthread 1`);

  const tmp = await mkdtemp(join(tmpdir(), 'llmlb-bench-'));
  scratch.add(tmp).add(BUILD);
  try {
    await compileForBench(ROOT, BUILD);
    if (targets.includes('llmlb-base') && BASE_REV) {
      scratch.add(BASE_BUILD);
      await compileBase(BASE_REV, join(tmp, 'base'));
    }
    const upstream = await startNodeChild('upstream-child.js', ['2']);
    const [u0, u1] = upstream.urls;
    if (u0 === undefined || u1 === undefined) throw new Error('upstream child gave fewer than 2 URLs');
    const ups = [u0, u1];
    const running = new Map<TargetName, Started>();
    for (const t of targets) {
      if (t === 'direct') running.set(t, { url: u0, pid: undefined });
      else if (t === 'llmlb') {
        const prof = PROF_DIR ? ['--cpu-prof', `--cpu-prof-dir=${resolve(PROF_DIR)}`] : [];
        prof.push(...LLMLB_NODE_FLAGS);
        if (PROF_DIR) await mkdir(resolve(PROF_DIR), { recursive: true });
        running.set(t, await startProxyChild('router-child.js', ups, prof));
      } else if (t === 'llmlb-base')
        running.set(
          t,
          await startProxyChild('router-child.js', ups, LLMLB_NODE_FLAGS, undefined, BASE_BUILD),
        );
      else if (t === 'llmlb-workers') running.set(t, await startWorkers(ups, tmp));
      else if (t === 'llmlb-info')
        running.set(
          t,
          await startProxyChild('router-child.js', ups, [], { ...process.env, BENCH_LLMLB_LOG: 'info' }),
        );
      else if (t === 'llmlb-capture')
        running.set(
          t,
          await startProxyChild('router-child.js', ups, [], {
            ...process.env,
            BENCH_LLMLB_TRACE: join(tmp, 'capture.jsonl'),
          }),
        );
      else if (t === 'haproxy') running.set(t, await startHaproxy(ups, tmp));
      else if (t === 'node-min') running.set(t, await startProxyChild('min-proxy-child.js', ups));
      else throw new Error(`no way to start target ${t satisfies never}`);
    }
    const urls = new Map([...running].map(([t, s]) => [t, s.url]));
    for (const [t, url] of urls) await sanityCheck(t, url);

    // Load: every target once per round, order reversed every other round.
    const rounds: Map<TargetName, LoadResult>[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const order = [...running.keys()];
      if (r % 2 === 1) order.reverse();
      const got = new Map<TargetName, LoadResult>();
      for (const t of order) {
        const s = running.get(t)!;
        if (WARMUP_S > 0) await load(s.url, WARMUP_S);
        const res = await load(s.url, DURATION_S, s.pid, upstream.child.pid);
        got.set(t, res);
        console.log(
          `  round ${r + 1}/${ROUNDS}  ${LABEL[t].padEnd(24)} ${f0(res.rps).padStart(7)} req/s  ` +
            `p50 ${res.p50} ms  p99 ${res.p99} ms  ` +
            `cpu/req: proxy ${f0(res.proxyCpuUs)} µs, upstream ${f0(res.upstreamCpuUs)} µs, ` +
            `client ${f0(res.clientCpuUs)} µs, other jobs ${f0(res.otherCpuUs)} µs` +
            (res.errors || res.non2xx || res.timeouts
              ? `  errors ${res.errors} non-2xx ${res.non2xx} timeouts ${res.timeouts}`
              : ''),
        );
      }
      rounds.push(got);
    }

    console.log(`  sequential: ${SEQ_N} requests per target on one keep-alive connection…`);
    const seq = await sequentialAll(urls);

    // Summary: medians over rounds; ratios taken within each round, then median and spread.
    const summary = new Map<
      TargetName,
      { rps: number; p50: number; p99: number; proxyCpuUs: number | null; errors: number }
    >();
    for (const t of urls.keys()) {
      const rs = rounds.map((g) => g.get(t)!);
      const cpu = rs.map((x) => x.proxyCpuUs).filter((x): x is number => x !== null);
      summary.set(t, {
        rps: median(rs.map((x) => x.rps)),
        p50: median(rs.map((x) => x.p50)),
        p99: median(rs.map((x) => x.p99)),
        proxyCpuUs: cpu.length ? median(cpu) : null,
        errors: rs.reduce((a, x) => a + x.errors + x.non2xx + x.timeouts, 0),
      });
    }
    const ratio = (a: TargetName, b: TargetName): Ratio | null => {
      if (!urls.has(a) || !urls.has(b)) return null;
      const xs = rounds.map((g) => g.get(a)!.rps / g.get(b)!.rps);
      return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
    };
    const ratios = {
      llmlbVsDirect: ratio('llmlb', 'direct'),
      workersVsLlmlb: ratio('llmlb-workers', 'llmlb'),
      workersVsHaproxy: ratio('llmlb-workers', 'haproxy'),
      llmlbVsHaproxy: ratio('llmlb', 'haproxy'),
      llmlbVsNodeMin: ratio('llmlb', 'node-min'),
      llmlbVsBase: ratio('llmlb', 'llmlb-base'),
      baseVsNodeMin: ratio('llmlb-base', 'node-min'),
      haproxyVsDirect: ratio('haproxy', 'direct'),
      nodeMinVsHaproxy: ratio('node-min', 'haproxy'),
      llmlbInfoVsLlmlb: ratio('llmlb-info', 'llmlb'),
      llmlbInfoVsHaproxy: ratio('llmlb-info', 'haproxy'),
      llmlbCaptureVsLlmlb: ratio('llmlb-capture', 'llmlb'),
    };
    const addedVsDirect = (t: TargetName): { p50: number; p99: number } | null => {
      const d = seq.get('direct');
      const x = seq.get(t);
      return d && x && t !== 'direct' ? { p50: x.p50 - d.p50, p99: x.p99 - d.p99 } : null;
    };

    console.log(
      `\nUnder load: ${CONNECTIONS} connections, median of ${ROUNDS} × ${DURATION_S} s ` +
        `(latency at 1 ms resolution); sequential: one connection, ${SEQ_N} requests`,
    );
    console.log(
      table(
        ['target', 'req/s', 'p50 ms', 'p99 ms', 'proxy CPU µs/req', 'errors', 'seq p50 ms', 'seq p99 ms'],
        [...summary].map(([t, s]) => [
          LABEL[t],
          f0(s.rps),
          String(s.p50),
          String(s.p99),
          f0(s.proxyCpuUs),
          String(s.errors),
          f3(seq.get(t)?.p50 ?? NaN),
          f3(seq.get(t)?.p99 ?? NaN),
        ]),
      ),
    );

    // Where the machine's CPU went per answered request: with every part on the same cores, a
    // router with more workers can only go faster while the others leave cores free.
    const med = (t: TargetName, k: 'clientCpuUs' | 'upstreamCpuUs' | 'proxyCpuUs' | 'otherCpuUs'): string => {
      const xs = rounds.map((g) => g.get(t)![k]).filter((x): x is number => x !== null);
      return xs.length ? f0(median(xs)) : '-';
    };
    console.log('\nCPU µs per answered request (median over rounds): client, upstream, proxy, other jobs');
    console.log(
      table(
        ['target', 'client', 'upstream', 'proxy', 'other jobs'],
        [...urls.keys()].map((t) => [
          LABEL[t],
          med(t, 'clientCpuUs'),
          med(t, 'upstreamCpuUs'),
          med(t, 'proxyCpuUs'),
          med(t, 'otherCpuUs'),
        ]),
      ),
    );

    const ratioRows: [string, Ratio | null][] = [
      ['llmlb / direct', ratios.llmlbVsDirect],
      [`${LABEL['llmlb-workers']} / llmlb`, ratios.workersVsLlmlb],
      [`${LABEL['llmlb-workers']} / HAProxy`, ratios.workersVsHaproxy],
      ['llmlb / HAProxy', ratios.llmlbVsHaproxy],
      ['llmlb / node-min', ratios.llmlbVsNodeMin],
      ['llmlb / llmlb-base', ratios.llmlbVsBase],
      ['llmlb-base / node-min', ratios.baseVsNodeMin],
      ['HAProxy / direct', ratios.haproxyVsDirect],
      ['node-min / HAProxy', ratios.nodeMinVsHaproxy],
      ['llmlb-info / llmlb', ratios.llmlbInfoVsLlmlb],
      ['llmlb-info / HAProxy', ratios.llmlbInfoVsHaproxy],
      ['llmlb-capture / llmlb', ratios.llmlbCaptureVsLlmlb],
    ];
    console.log('\nreq/s ratios (within each round; median and range over rounds)');
    console.log(
      table(
        ['ratio', 'median', 'range'],
        ratioRows
          .filter(([name, r]) => r !== null || (name === 'llmlb / HAProxy' && urls.has('llmlb')))
          .map(([name, r]) =>
            r ? [name, pct(r.median), `${pct(r.min)} – ${pct(r.max)}`] : [name, 'skipped', 'no haproxy'],
          ),
      ),
    );

    const addedRows: [TargetName, { p50: number; p99: number }][] = [];
    for (const t of [
      'llmlb',
      'llmlb-workers',
      'llmlb-base',
      'llmlb-info',
      'llmlb-capture',
      'haproxy',
      'node-min',
    ] as const) {
      const a = addedVsDirect(t);
      if (a) addedRows.push([t, a]);
    }
    if (addedRows.length) {
      console.log(`\nAdded latency vs direct, sequential requests (${SEQ_N}, one keep-alive connection)`);
      console.log(
        table(
          ['through', 'added p50 ms', 'added p99 ms'],
          addedRows.map(([t, a]) => [LABEL[t], f3(a.p50), f3(a.p99)]),
        ),
      );
    }

    const llmlbAdded = addedVsDirect('llmlb');
    const vsHa = ratios.llmlbVsHaproxy;
    const verdicts: Verdict[] = [
      {
        check: 'llmlb req/s vs HAProxy',
        value: vsHa?.median ?? null,
        target: `≥ ${pct(MIN_RATIO_VS_HAPROXY)}`,
        result: vsHa === null ? 'SKIP' : vsHa.median >= MIN_RATIO_VS_HAPROXY ? 'PASS' : 'FAIL',
      },
      {
        check: 'llmlb added p50 latency',
        value: llmlbAdded?.p50 ?? null,
        target: `≤ ${MAX_ADDED_P50_MS} ms`,
        result: llmlbAdded === null ? 'SKIP' : llmlbAdded.p50 <= MAX_ADDED_P50_MS ? 'PASS' : 'FAIL',
      },
    ];
    const errorsTotal = [...summary.values()].reduce((a, s) => a + s.errors, 0);
    console.log('\nTargets');
    console.log(
      table(
        ['check', 'value', 'target', 'result'],
        verdicts.map((v, i) => [
          v.check,
          v.value === null ? '-' : i === 0 ? pct(v.value) : `${f3(v.value)} ms`,
          v.target,
          v.result === 'SKIP' && i === 0 ? 'SKIP (no haproxy)' : v.result,
        ]),
      ),
    );
    if (errorsTotal > 0) console.log(`\nWARNING: ${errorsTotal} errors/non-2xx/timeouts during load runs`);

    const out = {
      at: new Date().toISOString(),
      machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model.trim() ?? null, node: process.version },
      haproxy: haVersion ?? null,
      config: {
        connections: CONNECTIONS,
        durationS: DURATION_S,
        warmupS: WARMUP_S,
        rounds: ROUNDS,
        sequentialRequests: SEQ_N,
        bodyBytes: Buffer.byteLength(GENERATE_BODY),
        targets: [...urls.keys()],
        skipped: wanted.filter((t) => !urls.has(t)),
      },
      rounds: rounds.map((g) => Object.fromEntries(g)),
      summary: Object.fromEntries(summary),
      ratios,
      sequential: Object.fromEntries(seq),
      addedLatencyMs: Object.fromEntries(addedRows),
      verdicts,
      errors: errorsTotal,
      elapsedS: (Date.now() - started) / 1000,
    };
    const outDir = join(ROOT, 'bench-out');
    await mkdir(outDir, { recursive: true });
    await writeFile(join(outDir, 'proxy.json'), JSON.stringify(out, null, 2) + '\n');
    console.log(`\nwrote bench-out/proxy.json (${out.elapsedS.toFixed(0)} s)`);
    if (STRICT && (verdicts.some((v) => v.result === 'FAIL') || errorsTotal > 0)) process.exitCode = 1;
  } finally {
    await stopAll();
    for (const d of scratch) await rm(d, { recursive: true, force: true });
    scratch.clear();
    clearTimeout(watchdog);
  }
}

main().catch(async (err: unknown) => {
  console.error('bench:proxy failed:', err instanceof Error ? err.message : err);
  await stopAll();
  process.exit(1);
});
