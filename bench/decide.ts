/**
 * `npm run bench:decide`: how long one routing decision takes, with 100 and 1000 backends and a
 * prefix trie holding 100k entries (SkyLB's prefix-trie at scale). A decision is what the
 * scheduler does per request on the hot path: the policy's pick plus its onDispatch (where the
 * trie learns the prefix). Loads and engine metrics change between decisions, and every prompt is
 * a shared system prompt plus a conversation of its own, so trie walks are as deep as in a chat
 * fleet. Goal: p99 ≤ 200 µs at 1000 backends. Then the trie's memory per entry (heap after N
 * inserts, array buffers included, with GC forced), and the bound holding over a long run.
 *
 * Then the router queue under overload: HELD requests held by least-connections + SP-P over 100
 * backends, and what one event costs (a probe letting one request go, an arrival, a completion),
 * for the incremental scheduler and the one before it (which re-asked for every held request on
 * every event). Goal: ≤ 50 µs per event with 10k held; both must decide the same.
 *
 * Also the default (estimated-wait) on ~50k-token prompts at 16 backends (issue #30, goal p99 ≤
 * 50 µs): wall p50/p99, and the same over the decisions no involuntary context switch interrupted
 * (on this shared machine the others' load otherwise decides the p99); and the prefix credit alone
 * (recording a 50k-token prompt, looking it up on 16 candidates).
 *
 * DECIDE_PARTS=long,credit runs only those parts (trie, long, credit, held, memory).
 * Figures go to stdout as tables and to bench-out/decide.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { performance, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { createPolicy, type PolicySpec } from '../src/core/policies/index.js';
import { endpointPickerConfigSchema } from '../src/core/policies/framework/endpoint-picker-config.js';
import { PrefixCredit } from '../src/core/policies/shared/prefix-credit.js';
import { ProfilePolicy } from '../src/core/policies/framework/profile.js';
import { PrefixTrie } from '../src/core/prefix/prefix-trie.js';
import { createRng } from '../src/core/rng.js';
import { Scheduler } from '../src/core/scheduler.js';
import { ReferenceScheduler } from '../src/core/scheduler-reference.testing.js';
import { backendView } from '../src/core/testing.js';
import { isHold } from '../src/core/types.js';
import type { BackendView, Policy, RequestInfo } from '../src/core/types.js';
import { percentile as quantile } from '../src/report/stats.js';
import { formatTable } from '../src/report/table.js';

const BACKENDS = (process.env.DECIDE_BACKENDS ?? '100,1000').split(',').map(Number);
const TRIE_ENTRIES = Number(process.env.DECIDE_TRIE_ENTRIES ?? 100_000);
const DECISIONS = Number(process.env.DECIDE_N ?? 20_000);
const WARMUP = 2_000;
const GOAL_P99_US = 200;
const HELD = Number(process.env.DECIDE_HELD ?? 10_000);
const HELD_BACKENDS = 100;
const GOAL_EVENT_US = 50;

const gc = (globalThis as { gc?: () => void }).gc;

type MutableView = { -readonly [K in keyof BackendView]: BackendView[K] };

function fleet(n: number): MutableView[] {
  return Array.from({ length: n }, (_, i) => ({
    ...backendView(`b${i}`, i, { api: 'openai', metrics: { running: 8, waiting: 0, kvUsage: 0.5, at: 0 } }),
  }));
}

/**
 * Prompts: one of 4 system prompts (~1.6k chars) + a conversation of its own growing by turns, up
 * to ~16k characters (then the conversation ends); 2000 conversations live at a time.
 */
function promptSource(seed: number): (i: number) => { text: string; session: string } {
  const rnd = createRng(seed);
  const word = (): string => Math.floor(rnd() * 1e9).toString(36);
  const systems = Array.from({ length: 4 }, () => Array.from({ length: 200 }, word).join(' '));
  const convos: string[] = [];
  return (i) => {
    // Mostly new conversations while filling, then a mix of follow-up turns and new ones.
    let c = convos.length === 0 || rnd() < 0.3 ? -1 : Math.floor(rnd() * convos.length);
    if (c >= 0 && convos[c]!.length > 16_000) {
      convos.splice(c, 1);
      c = -1;
    }
    if (c < 0) {
      const text =
        systems[i % 4]! + '\nuser: ' + Array.from({ length: 60 + Math.floor(rnd() * 400) }, word).join(' ');
      convos.push(text);
      if (convos.length > 2_000) convos.shift();
      return { text, session: `s${convos.length}` };
    }
    const text =
      convos[c]! + '\nassistant: ' + Array.from({ length: 40 + Math.floor(rnd() * 200) }, word).join(' ');
    convos[c] = text;
    return { text, session: `s${c}` };
  };
}

const profiles = endpointPickerConfigSchema.parse({
  plugins: [
    { type: 'pending-filter' },
    { type: 'queue-scorer' },
    { type: 'kv-cache-utilization-scorer' },
    { type: 'prefix-cache-scorer' },
    { type: 'max-score-picker' },
  ],
  schedulingProfiles: [
    {
      name: 'profile(sp-p + queue + kv + prefix-cache scorers)',
      plugins: [
        { pluginRef: 'pending-filter' },
        { pluginRef: 'queue-scorer', weight: 2 },
        { pluginRef: 'kv-cache-utilization-scorer', weight: 1 },
        { pluginRef: 'prefix-cache-scorer', weight: 3 },
        { pluginRef: 'max-score-picker' },
      ],
    },
  ],
});

const POLICIES: (PolicySpec | string)[] = [
  'least-connections',
  'consistent-hash',
  { name: 'consistent-hash', params: { push: 'sp-p' } },
  { name: 'prefix-trie', params: { maxEntries: TRIE_ENTRIES } },
  { name: 'prefix-trie', params: { push: 'sp-p', maxEntries: TRIE_ENTRIES } },
  { name: 'sglang-cache-aware', params: { maxEntries: TRIE_ENTRIES } },
  profiles.schedulingProfiles[0]!.name,
];
const label = (s: PolicySpec | string): string =>
  typeof s === 'string' ? s : `${s.name}${s.params?.push ? ` (${String(s.params.push)})` : ''}`;
/** DECIDE_POLICIES=prefix-trie runs only the policies whose label contains one of these words. */
const ONLY = process.env.DECIDE_POLICIES?.split(',');
const selected = POLICIES.filter((s) => !ONLY || ONLY.some((w) => label(s).includes(w)));

interface Row {
  policy: string;
  backends: number;
  trieEntries: number | null;
  p50us: number;
  p99us: number;
  meanUs: number;
  cpuP50us: number;
  cpuP99us: number;
}

function run(spec: PolicySpec | string, n: number): Row {
  const policy: Policy = createPolicy(spec, createRng(1), profiles);
  const bs = fleet(n);
  const rnd = createRng(7);
  const next = promptSource(11);
  let id = 0;
  const req = (now: number): RequestInfo => {
    const p = next(id);
    return {
      id: String(id++),
      model: 'm',
      api: 'openai',
      arrivedAt: now,
      promptText: p.text,
      sessionKey: p.session,
    };
  };
  /** One decision: pick + onDispatch (then churn moves the world on: loads, a probe now and then). */
  const decide = (r: RequestInfo, now: number): void => {
    const b = policy.pick(r, bs, now);
    if (!isHold(b)) {
      const v = bs[b.index]!;
      v.inFlight++;
      v.dispatchedSinceMetrics++;
      policy.onDispatch?.(r, v, now);
    }
  };
  const churn = (now: number): void => {
    // Completions keep loads bounded and varied; a probe every 50 decisions resets corrections.
    for (let k = 0; k < 2; k++) {
      const v = bs[Math.floor(rnd() * n)]!;
      if (v.inFlight > 0) {
        v.inFlight--;
        v.completedSinceMetrics++;
      }
    }
    if (Math.floor(now) % 50 === 0) {
      for (const v of bs) {
        v.metrics = { running: v.inFlight, waiting: rnd() < 0.2 ? 1 : 0, kvUsage: rnd(), at: now };
        v.dispatchedSinceMetrics = v.completedSinceMetrics = 0;
      }
    }
  };
  // Fill: the trie policies until the trie holds TRIE_ENTRIES nodes (steady state, eviction on).
  const trie = trieOf(policy);
  let now = 0;
  const step = (): void => {
    decide(req(now), now);
    churn(now++);
  };
  if (trie) while (trie.size < TRIE_ENTRIES) step();
  for (let i = 0; i < WARMUP; i++) step();
  const times = new Float64Array(DECISIONS);
  // CPU time of the process over each decision too: on a shared machine, wall time also counts the
  // moments another process held the core (a 4 ms time slice shows up as a 4 ms "decision").
  const cpu = new Float64Array(DECISIONS);
  for (let i = 0; i < DECISIONS; i++) {
    // The request (and its prompt string) is built outside the timed part, as the router parses it.
    const r = req(now);
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    decide(r, now);
    times[i] = (performance.now() - t0) * 1000;
    const c = process.cpuUsage(c0);
    cpu[i] = c.user + c.system;
    churn(now++);
  }
  const sorted = times.slice().sort();
  const cpuSorted = cpu.slice().sort();
  let sum = 0;
  for (const t of times) sum += t;
  return {
    policy: label(spec),
    backends: n,
    trieEntries: trie ? trie.size : null,
    p50us: quantile(sorted, 0.5),
    p99us: quantile(sorted, 0.99),
    meanUs: sum / DECISIONS,
    cpuP50us: quantile(cpuSorted, 0.5),
    cpuP99us: quantile(cpuSorted, 0.99),
  };
}

interface HeldRow {
  scheduler: string;
  held: number;
  backends: number;
  events: number;
  p50us: number;
  meanUs: number;
  p99us: number;
}

/**
 * Overload: every engine reports a request waiting, so SP-P holds all HELD requests in the router
 * queue. Each round, one engine's probe says it has room (one request goes), two requests arrive
 * (held), and a request pushed a while ago completes (its engine takes one more). Returns per-event times and the dispatches
 * in order, to check both schedulers decide the same.
 */
function heldQueue(
  make: (policy: Policy) => Scheduler | ReferenceScheduler,
  label: string,
  rounds: number,
): { row: HeldRow; dispatches: string[] } {
  const s = make(createPolicy({ name: 'least-connections', params: { push: 'sp-p' } }, createRng(1)));
  const rnd = createRng(9);
  const names = Array.from({ length: HELD_BACKENDS }, (_, i) => `b${i}`);
  // Capped at 0 while filling, so the old scheduler's per-arrival pump stays a cheap scan.
  for (const name of names)
    s.addBackend({ name, api: 'openai', models: ['m'], maxConcurrency: 0, weight: 1 });
  let id = 0;
  const req = (now: number): RequestInfo => ({
    id: String(id++),
    model: 'm',
    api: 'openai',
    arrivedAt: now,
    promptText: 'hello',
  });
  for (let i = 0; i < HELD; i++) s.submit(req(0), 0);
  for (const name of names) s.setMetrics(name, { running: 8, waiting: 1, kvUsage: 0.5, at: 0 });
  for (const name of names) s.updateBackend(name, { maxConcurrency: Infinity }, 0);
  const dispatches: string[] = [];
  const pushed: string[] = [];
  const record = (ds: readonly { type: string; request: RequestInfo; backend?: string }[]): void => {
    for (const d of ds)
      if (d.type === 'dispatch') {
        dispatches.push(`${d.request.id}->${d.backend}`);
        pushed.push(d.request.id);
      }
  };
  const times: number[] = [];
  const timed = <T>(f: () => T): T => {
    const t0 = performance.now();
    const r = f();
    times.push((performance.now() - t0) * 1000);
    return r;
  };
  for (let r = 1; r <= rounds; r++) {
    const name = names[Math.floor(rnd() * names.length)]!;
    // The probe (setMetrics) and the pump the host runs after it: one event.
    record(
      timed(() => {
        s.setMetrics(name, { running: 8, waiting: 0, kvUsage: 0.5, at: r });
        return s.pump(r);
      }),
    );
    // Two arrivals a round: the probe and the completion each let one request go.
    record(timed(() => s.submit(req(r), r)));
    record(timed(() => s.submit(req(r), r)));
    if (pushed.length > 8) {
      const done = pushed.shift()!;
      record(timed(() => s.complete(done, { ok: true, dispatchedAt: r - 1, finishedAt: r }, r)));
    }
  }
  if (s.queueLength < HELD * 0.9) throw new Error(`held-queue bench: only ${s.queueLength} held`);
  const sorted = Float64Array.from(times).sort();
  return {
    row: {
      scheduler: label,
      held: s.queueLength,
      backends: HELD_BACKENDS,
      events: times.length,
      p50us: quantile(sorted, 0.5),
      meanUs: times.reduce((a, b) => a + b, 0) / times.length,
      p99us: quantile(sorted, 0.99),
    },
    dispatches,
  };
}

/** The trie of a prefix-trie picker inside a profile policy, if it has one. */
function trieOf(policy: Policy): PrefixTrie | undefined {
  if (!(policy instanceof ProfilePolicy)) return undefined;
  for (const p of policy.allPlugins) if ('trie' in p && p.trie instanceof PrefixTrie) return p.trie;
  return undefined;
}

/**
 * Bytes per trie entry: JS heap plus array buffers (the trie's slot arrays live outside the heap)
 * after filling a trie to `entries` nodes, minus before, over the size.
 */
function memoryPerEntry(
  entries: number,
  chunkChars: number,
  backends: number,
  evict: boolean,
): { bytes: number; chars: number } {
  const next = promptSource(3);
  const texts: string[] = [];
  const keysets: Float64Array[] = [];
  const probe = new PrefixTrie({ chunkChars, maxEntries: Number.MAX_SAFE_INTEGER, maxPrefixChars: 32_768 });
  // Precompute keys first so they are not counted as trie memory.
  let total = 0;
  for (let i = 0; total < entries * 1.5; i++) {
    const t = next(i).text;
    texts.push(t);
    const k = probe.keys(t);
    keysets.push(k);
    total += k.length;
  }
  gc?.();
  gc?.();
  const before = heapAndBuffers();
  // With eviction: 1.5× the bound goes in (steady state, the node map has churned); without: fill once.
  const trie = new PrefixTrie({
    chunkChars,
    maxEntries: evict ? entries : Number.MAX_SAFE_INTEGER,
    maxPrefixChars: 32_768,
  });
  for (let i = 0; i < keysets.length && (evict || trie.size < entries); i++)
    trie.insert(keysets[i]!, `b${i % backends}`);
  gc?.();
  gc?.();
  const after = heapAndBuffers();
  const bytes = (after - before) / trie.size;
  void texts;
  return { bytes, chars: bytes / chunkChars };
}

function heapAndBuffers(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/** Machine speed: ns per character of a plain charCodeAt loop (well under 1 on an idle x86 core). */
function calibrate(): number {
  const text = 'calibration text '.repeat(600);
  let z = 0;
  const t0 = performance.now();
  for (let r = 0; r < 2000; r++) for (let i = 0; i < text.length; i++) z = (z + text.charCodeAt(i)) | 0;
  const ns = ((performance.now() - t0) * 1e6) / (2000 * text.length);
  return z === 42 ? ns + 1e-9 : ns;
}
const nsPerChar = calibrate();
console.log(
  `machine: a plain charCodeAt loop runs at ${nsPerChar.toFixed(2)} ns/char; load average ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')} on ${cpus().length} cores\n`,
);
console.log(
  `decision time: pick + onDispatch, ${DECISIONS} decisions after ${WARMUP} warm-up; prefix tries filled to ${TRIE_ENTRIES} entries (default 64-char chunks)\n`,
);
/** DECIDE_PARTS=long runs only those parts (trie, long, credit, held, memory; default all). */
const PARTS = new Set((process.env.DECIDE_PARTS ?? 'trie,long,credit,held,memory').split(','));
const rows: Row[] = [];
for (const n of PARTS.has('trie') ? BACKENDS : []) {
  for (const spec of selected) {
    const r = run(spec, n);
    rows.push(r);
    process.stdout.write(`  ${r.policy} @ ${n}: p99 ${r.p99us.toFixed(1)} µs\n`);
  }
}
if (rows.length > 0) console.log();
if (rows.length > 0)
  console.log(
    formatTable(
      [
        'policy',
        'backends',
        'trie entries',
        'wall p50 µs',
        'wall p99 µs',
        'wall mean µs',
        'cpu p50 µs',
        'cpu p99 µs',
        `cpu p99 ≤ ${GOAL_P99_US} µs`,
      ],
      rows.map((r) => [
        r.policy,
        String(r.backends),
        r.trieEntries === null ? '-' : String(r.trieEntries),
        r.p50us.toFixed(1),
        r.p99us.toFixed(1),
        r.meanUs.toFixed(1),
        r.cpuP50us.toFixed(0),
        r.cpuP99us.toFixed(0),
        r.cpuP99us <= GOAL_P99_US ? 'yes' : 'NO',
      ]),
    ),
  );
console.log(
  `\nload average during the run: ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')} on ${cpus().length} cores`,
);

// The default (estimated-wait, prefix credit on) on prefix-heavy traffic (issue #30): 16 backends,
// prompts of ~50k tokens (200k characters: 40 documents re-read, each with a question of its own).
// A decision is pick + onDispatch, with completions between decisions. The credit hashes a prompt
// once, at its first pick (O(its length), like reading its body): timed apart from the decision.
interface LongRow {
  backends: number;
  promptChars: number;
  decisions: number;
  hashP50us: number;
  hashP99us: number;
  p50us: number;
  p99us: number;
  cpuP99us: number;
  /** Over the decisions no involuntary context switch interrupted (the machine's load left out). */
  quietP50us: number;
  quietP99us: number;
  /** Share of decisions interrupted by one. */
  preempted: number;
  /**
   * Unpreempted decisions split by what their dispatch recorded (issue #30, which decisions are the
   * slowest 1 %): a prompt new to the backend (its record grew by ≥ 64 chunks: ~317 keys in each of
   * the two records), and the rest. Share of decisions, p50, p99.
   */
  newRecord: { share: number; p50us: number; p99us: number; dispatchP50us: number; dispatchP99us: number };
  rest: { p50us: number; p99us: number; dispatchP50us: number; dispatchP99us: number };
  heapMiB: number;
  /** Of the slowest 1 % of decisions, the share that overlapped a GC pause. */
  slowWithGc: number;
  /** GC time over the timed decisions' span, ms, and the pauses' count. */
  gcMs: number;
  gcPauses: number;
  /** Chunk keys recorded per backend at the end (mean, max). */
  chunksMean: number;
  chunksMax: number;
}
async function longPrompts(n: number, decisions: number): Promise<LongRow> {
  const policy = createPolicy('estimated-wait', createRng(1));
  const bs = fleet(n);
  const rnd = createRng(3);
  const word = (): string => Math.floor(rnd() * 1e9).toString(36);
  const docs = Array.from({ length: 40 }, () => {
    let d = '';
    while (d.length < 200_000) d += word() + ' ';
    return d;
  });
  const flights: { r: RequestInfo; v: MutableView; at: number }[] = [];
  let id = 0;
  const hash: number[] = [];
  const times: number[] = [];
  const cpu: number[] = [];
  /** Decisions no involuntary context switch interrupted (the OS gave the core to another process). */
  const quiet: number[] = [];
  let preemptedCount = 0;
  /** Per backend, its record's chunks after the last dispatch there (read outside the timing). */
  const chunksAt = new Array<number>(n).fill(0);
  const quietNew: number[] = [];
  const quietRest: number[] = [];
  /** Of those, the onDispatch part (recording the prompt), µs. */
  const dispatchNew: number[] = [];
  const dispatchRest: number[] = [];
  let newCount = 0;
  /** Start of each timed decision (performance.now() ms), to match against GC pauses. */
  const starts: number[] = [];
  const pauses: PerformanceEntry[] = [];
  const obs = new PerformanceObserver((list) => pauses.push(...list.getEntries()));
  obs.observe({ entryTypes: ['gc'] });
  gc?.();
  const heap0 = heapAndBuffers();
  for (let i = 0; i < decisions; i++) {
    const now = i * 20;
    // As the router has it: one flat string parsed from the body (built outside the timed part).
    const text = Buffer.from(
      docs[Math.floor(rnd() ** 2 * docs.length)]! + `\nuser: ${word()} ${word()}?`,
    ).toString();
    const r: RequestInfo = { id: String(id++), model: 'm', api: 'openai', arrivedAt: now, promptText: text };
    // First sight: the prompt is hashed (memoised by id until it is dispatched).
    const h0 = performance.now();
    policy.pick(r, bs, now);
    const h = (performance.now() - h0) * 1000;
    const s0 = process.resourceUsage().involuntaryContextSwitches;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const b = policy.pick(r, bs, now);
    let td = t0;
    if (!isHold(b)) {
      const v = bs[b.index]!;
      v.inFlight++;
      td = performance.now();
      policy.onDispatch?.(r, v, now);
      flights.push({ r, v, at: now });
    }
    const t1 = performance.now();
    const t = (t1 - t0) * 1000;
    const dispatchUs = td === t0 ? 0 : (t1 - td) * 1000;
    const c = process.cpuUsage(c0);
    const preempted = process.resourceUsage().involuntaryContextSwitches !== s0;
    let fresh = false;
    if (!isHold(b)) {
      const c = policy.describe?.(bs[b.index]!.name).prefixChunks ?? 0;
      fresh = c - chunksAt[b.index]! >= 64;
      chunksAt[b.index] = c;
    }
    if (i >= WARMUP / 4) {
      if (preempted) preemptedCount++;
      else {
        quiet.push(t);
        (fresh ? quietNew : quietRest).push(t);
        (fresh ? dispatchNew : dispatchRest).push(dispatchUs);
      }
      if (fresh) newCount++;
      hash.push(Math.max(0, h - t));
      times.push(t);
      starts.push(t0);
      cpu.push(c.user + c.system);
    }
    // Completions: the oldest answers end, as an engine's would (prefill 50 µs/token, 20 ms/token out).
    while (flights.length > n * 8) {
      const f = flights.shift()!;
      f.v.inFlight--;
      const prompt = Math.round(f.r.promptText.length / 4);
      const out = 50 + Math.floor(rnd() * 200);
      policy.onComplete?.(
        f.r,
        f.v,
        {
          ok: true,
          dispatchedAt: f.at,
          firstByteAt: f.at + 100,
          finishedAt: now,
          promptTokens: prompt,
          completionTokens: out,
          promptEvalMs: 100,
          evalMs: Math.max(1, now - f.at - 100),
          cachedTokens: Math.floor(prompt * 0.9),
        },
        now,
      );
    }
  }
  gc?.();
  const heap = (heapAndBuffers() - heap0) / 2 ** 20;
  // GC entries are delivered asynchronously (the pause's own start time is kept): let them in.
  await new Promise((resolve) => setTimeout(resolve, 20));
  pauses.push(...obs.takeRecords());
  obs.disconnect();
  const q = (xs: number[], p: number): number => quantile(Float64Array.from(xs).sort(), p);
  const p99 = q(times, 0.99);
  const span0 = starts[0] ?? 0;
  const span1 = (starts[starts.length - 1] ?? 0) + (times[times.length - 1] ?? 0) / 1000;
  let gcMs = 0;
  let gcPauses = 0;
  for (const e of pauses)
    if (e.startTime >= span0 && e.startTime <= span1) {
      gcMs += e.duration;
      gcPauses++;
    }
  let slow = 0;
  let slowGc = 0;
  for (let i = 0; i < times.length; i++) {
    if (times[i]! < p99) continue;
    slow++;
    const a = starts[i]!;
    const b = a + times[i]! / 1000;
    if (pauses.some((e) => e.startTime < b && e.startTime + e.duration > a)) slowGc++;
  }
  const chunks = bs.map((v) => policy.describe?.(v.name).prefixChunks ?? 0);
  return {
    backends: n,
    promptChars: 200_000,
    decisions: times.length,
    hashP50us: q(hash, 0.5),
    hashP99us: q(hash, 0.99),
    p50us: q(times, 0.5),
    p99us: q(times, 0.99),
    cpuP99us: q(cpu, 0.99),
    quietP50us: q(quiet, 0.5),
    quietP99us: q(quiet, 0.99),
    preempted: preemptedCount / times.length,
    newRecord: {
      share: newCount / times.length,
      p50us: q(quietNew, 0.5),
      p99us: q(quietNew, 0.99),
      dispatchP50us: q(dispatchNew, 0.5),
      dispatchP99us: q(dispatchNew, 0.99),
    },
    rest: {
      p50us: q(quietRest, 0.5),
      p99us: q(quietRest, 0.99),
      dispatchP50us: q(dispatchRest, 0.5),
      dispatchP99us: q(dispatchRest, 0.99),
    },
    heapMiB: heap,
    slowWithGc: slow > 0 ? slowGc / slow : 0,
    gcMs,
    gcPauses,
    chunksMean: chunks.reduce((a, b) => a + b, 0) / n,
    chunksMax: Math.max(...chunks),
  };
}
const LONG_GOAL_US = 50;
const longRows: LongRow[] = [];
for (const n of PARTS.has('long') ? [16] : [])
  longRows.push(await longPrompts(n, Number(process.env.DECIDE_LONG_N ?? 3_000)));
if (longRows.length > 0) {
  console.log(
    `\nestimated-wait (the default) on ~50k-token prompts (200k characters, 40 documents re-read): pick + onDispatch, completions between\n`,
  );
  console.log(
    formatTable(
      [
        'backends',
        'prompt chars',
        'decisions',
        'first-sight hashing p50 µs',
        'p99 µs',
        'decision p50 µs',
        'decision p99 µs',
        'cpu p99 µs',
        'unpreempted p50 / p99 µs (share preempted)',
        'of which recording a prompt new to the backend: share, p50 / p99 µs',
        'the rest: p50 / p99 µs',
        'of which onDispatch p50 / p99 µs: recording; the rest',
        `p99 ≤ ${LONG_GOAL_US} µs`,
        'policy heap growth MiB',
        'chunk keys / backend (mean, max)',
        'GC ms (pauses)',
        'slowest 1 % during a GC',
      ],
      longRows.map((r) => [
        String(r.backends),
        String(r.promptChars),
        String(r.decisions),
        r.hashP50us.toFixed(0),
        r.hashP99us.toFixed(0),
        r.p50us.toFixed(1),
        r.p99us.toFixed(1),
        r.cpuP99us.toFixed(0),
        `${r.quietP50us.toFixed(1)} / ${r.quietP99us.toFixed(1)} (${(100 * r.preempted).toFixed(1)} %)`,
        `${(100 * r.newRecord.share).toFixed(1)} %, ${r.newRecord.p50us.toFixed(1)} / ${r.newRecord.p99us.toFixed(1)}`,
        `${r.rest.p50us.toFixed(1)} / ${r.rest.p99us.toFixed(1)}`,
        `${r.newRecord.dispatchP50us.toFixed(1)} / ${r.newRecord.dispatchP99us.toFixed(1)}; ${r.rest.dispatchP50us.toFixed(1)} / ${r.rest.dispatchP99us.toFixed(1)}`,
        r.p99us <= LONG_GOAL_US ? 'yes' : 'NO',
        r.heapMiB.toFixed(1),
        `${r.chunksMean.toFixed(0)}, ${r.chunksMax}`,
        `${r.gcMs.toFixed(0)} (${r.gcPauses})`,
        `${(100 * r.slowWithGc).toFixed(0)} %`,
      ]),
    ),
  );
}

// The prefix credit alone (what the default's decision spends on it, without the rest of the
// policy): 40 documents of 200k characters, each sent once to each of 16 backends (a 50k-token
// prompt new to the backend: ~320 keys recorded), then re-sent with a new question (found at once),
// and per request the lookup on all 16 candidates. Min and p50 over 640 of each.
interface CreditRow {
  step: string;
  minUs: number;
  p50Us: number;
  p90Us: number;
}
const creditRows: CreditRow[] = [];
let creditBytesPerBackend: number | undefined;
if (PARTS.has('credit')) {
  const rnd = createRng(3);
  const word = (): string => Math.floor(rnd() * 1e9).toString(36);
  const docs = Array.from({ length: 40 }, () => {
    let d = '';
    while (d.length < 200_000) d += word() + ' ';
    return d;
  });
  const c = new PrefixCredit({ chunkChars: 64, capacityChunks: 1 << 22, maxPrefixChars: 1 << 20 });
  // Every document's head is known (sent once elsewhere), so each prompt is hashed in full.
  for (let d = 0; d < docs.length; d++) {
    c.keysOf(`h${d}`, docs[d]!);
    c.record(`h${d}`, 'elsewhere', docs[d]!);
  }
  const fresh: number[] = [];
  const again: number[] = [];
  const lookups: number[] = [];
  let id = 0;
  for (let b = 0; b < 16; b++)
    for (let d = 0; d < docs.length; d++) {
      const text = `${docs[d]!}\nuser: ${word()}?`;
      const first = `r${id++}`;
      const k = c.keysOf(first, text);
      let t = performance.now();
      for (let x = 0; x < 16; x++) c.cachedChars(`b${x}`, k);
      lookups.push((performance.now() - t) * 1000);
      t = performance.now();
      c.record(first, `b${b}`, text);
      fresh.push((performance.now() - t) * 1000);
      const second = `r${id++}`;
      c.keysOf(second, text);
      t = performance.now();
      c.record(second, `b${b}`, text);
      again.push((performance.now() - t) * 1000);
    }
  const row = (step: string, xs: number[]): CreditRow => {
    const sorted = Float64Array.from(xs).sort();
    return { step, minUs: sorted[0]!, p50Us: quantile(sorted, 0.5), p90Us: quantile(sorted, 0.9) };
  };
  creditRows.push(
    row('record a 50k-token prompt new to the backend', fresh),
    row('record it re-sent (a new question)', again),
    row('look it up on 16 candidates', lookups),
  );
  // (bytesOf: absent before the credit's tables; the bench also runs against older trees.)
  creditBytesPerBackend = (c as { bytesOf?: (b: string) => number }).bytesOf?.('b0');
  console.log(
    `\nprefix credit alone: 40 documents of 200k characters × 16 backends (${c.sizeOf('b0')} chunk keys per backend${creditBytesPerBackend === undefined ? '' : `, ${(creditBytesPerBackend / 1024).toFixed(0)} KiB`})\n`,
  );
  console.log(
    formatTable(
      ['step', 'min µs', 'p50 µs', 'p90 µs'],
      creditRows.map((r) => [r.step, r.minUs.toFixed(1), r.p50Us.toFixed(1), r.p90Us.toFixed(1)]),
    ),
  );
}

const heldRows: HeldRow[] = [];
if (PARTS.has('held')) {
  // The router queue under overload: the scheduler before (a few rounds: each event costs ms) and now.
  const REF_ROUNDS = Number(process.env.DECIDE_HELD_REF_ROUNDS ?? 30);
  const before = heldQueue(
    (policy) => new ReferenceScheduler({ policy }),
    'before (rescan all held)',
    REF_ROUNDS,
  );
  const after = heldQueue((policy) => new Scheduler({ policy }), 'incremental', Math.max(REF_ROUNDS, 5_000));
  const same = before.dispatches.every((d, i) => after.dispatches[i] === d);
  heldRows.push(before.row, after.row);
  console.log(
    `\nrouter queue under overload: ${HELD} held by least-connections + SP-P, ${HELD_BACKENDS} backends; events are a probe + pump, an arrival, a completion\n`,
  );
  console.log(
    formatTable(
      [
        'scheduler',
        'held',
        'backends',
        'events',
        'p50 µs / event',
        'p99 µs / event',
        'mean µs / event',
        `p99 ≤ ${GOAL_EVENT_US} µs`,
      ],
      heldRows.map((r) => [
        r.scheduler,
        String(r.held),
        String(r.backends),
        String(r.events),
        r.p50us.toFixed(1),
        r.p99us.toFixed(1),
        r.meanUs.toFixed(1),
        r.p99us <= GOAL_EVENT_US ? 'yes' : 'NO',
      ]),
    ),
  );
  console.log(`same decisions over the first ${before.dispatches.length} dispatches: ${same ? 'yes' : 'NO'}`);
  if (!same) process.exitCode = 1;
}

let mem: {
  entries: number;
  chunkChars: number;
  backends: number;
  evict: boolean;
  bytes: number;
  chars: number;
}[] = [];
let bound: { inserted: number; maxSize: number; limit: number } | undefined;
if (PARTS.has('memory')) {
  if (!gc) console.log('\n(memory figures need --expose-gc: run through npm run bench:decide)');
  mem = [
    { entries: 100_000, chunkChars: 64, backends: 100, evict: false },
    { entries: 100_000, chunkChars: 64, backends: 100, evict: true },
    { entries: 100_000, chunkChars: 64, backends: 1000, evict: true },
    { entries: 100_000, chunkChars: 32, backends: 100, evict: true },
  ].map((m) => ({ ...m, ...memoryPerEntry(m.entries, m.chunkChars, m.backends, m.evict) }));
  console.log('\nprefix trie memory (JS heap + array buffers after filling, GC forced)\n');
  console.log(
    formatTable(
      ['entries', 'chunk chars', 'backends', 'filled', 'bytes / entry', 'bytes / indexed char', 'MiB total'],
      mem.map((m) => [
        String(m.entries),
        String(m.chunkChars),
        String(m.backends),
        m.evict ? '1.5× (evicting)' : 'once',
        m.bytes.toFixed(0),
        m.chars.toFixed(1),
        ((m.bytes * m.entries) / 2 ** 20).toFixed(1),
      ]),
    ),
  );

  // The bound over a long run: 1M inserts into a 100k trie.
  {
    const next = promptSource(5);
    const t = new PrefixTrie({ chunkChars: 64, maxEntries: TRIE_ENTRIES, maxPrefixChars: 32_768 });
    let max = 0;
    let inserted = 0;
    const t0 = performance.now();
    for (let i = 0; inserted < 10 * TRIE_ENTRIES; i++) {
      const k = t.keys(next(i).text);
      t.insert(k, `b${i % 100}`);
      inserted += k.length;
      if (t.size > max) max = t.size;
    }
    const ms = performance.now() - t0;
    console.log(
      `\nbound: ${inserted} chunk inserts into a ${TRIE_ENTRIES}-entry trie: largest size seen ${max} (${max <= TRIE_ENTRIES ? 'holds' : 'BROKEN'}), ${((ms * 1000) / inserted).toFixed(2)} µs per chunk inserted`,
    );
    bound = { inserted, maxSize: max, limit: TRIE_ENTRIES };
  }
}
mkdirSync('bench-out', { recursive: true });
writeFileSync(
  'bench-out/decide.json',
  JSON.stringify(
    {
      decisions: rows,
      longPrompts: longRows,
      prefixCredit: { steps: creditRows, bytesPerBackend: creditBytesPerBackend },
      heldQueue: heldRows,
      memory: mem,
      bound,
    },
    null,
    2,
  ),
);
