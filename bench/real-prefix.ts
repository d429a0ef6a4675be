/**
 * `npm run bench:real-prefix`: llmlb's policies in front of real llama.cpp engines with real KV
 * caches, on prefix-heavy traffic (issue #30, item 4).
 *
 * The bench writes a random-weight llama GGUF (real-prefix/gguf.ts), starts ENGINES engine
 * processes on it (real-prefix/engine.ts: node-llama-cpp, SLOTS slots each reusing the longest
 * cached prompt prefix as llama.cpp's server does, one CPU thread each), and for each policy in
 * turn: empties the engines' caches, starts `llmlb serve` over them, warms up (every document
 * once, through the router), then replays the same seeded open-loop client (real-prefix/
 * workload.ts: DOCS long documents re-read with short questions, Poisson at RATE) as streamed
 * OpenAI /v1/completions. Measured per policy: TTFT p50/p90 and mean E2E at the client,
 * throughput (requests/s and output tokens/s over first send → last answer), the engines' prompt
 * tokens served from cache, and each ratio to round-robin's, side by side in one run.
 *
 * The rate: --rate R/s, or by default --load 0.8 × the rate the fleet serves with no cache hits,
 * measured at start (calibrate), so round-robin runs near saturation on a machine of any speed
 * or load.
 *
 * Flags: --engines 3 --slots 2 --load 0.8 (or --rate R) --requests 40 --docs (engines×slots) --doc-min 1200
 * --doc-max 2400 --suffix 24 --max-tokens 16 --seed 1 --policies default,round-robin,prefix-trie,
 * least-connections --embd 128 --layers 4 --ff 512 --heads 4 --threads 1 --cli src/cli.ts (another
 * llmlb: a .ts runs under tsx, a .js under node) --metrics vllm (the engines' /metrics in vLLM's
 * names with its prefix-cache counters; llamacpp: llama-server --metrics' own names, no
 * prefix-cache counters — what a real llama.cpp fleet gives the router) --json FILE. Loopback only; children die with it.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { DEFAULT_POLICY } from '../src/config/schema.js';
import { isReadyMessage } from './common.js';
import { parameterCount, writeTinyLlamaGguf, type TinyLlamaShape } from './real-prefix/gguf.js';
import { prefixDocuments, prefixRequests, type PrefixWorkloadOptions } from './real-prefix/workload.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function flags() {
  const { values } = parseArgs({
    options: {
      engines: { type: 'string', default: '3' },
      slots: { type: 'string', default: '2' },
      rate: { type: 'string' },
      load: { type: 'string', default: '0.8' },
      requests: { type: 'string', default: '40' },
      docs: { type: 'string' },
      'doc-min': { type: 'string', default: '1200' },
      'doc-max': { type: 'string', default: '2400' },
      suffix: { type: 'string', default: '24' },
      'max-tokens': { type: 'string', default: '16' },
      seed: { type: 'string', default: '1' },
      policies: { type: 'string', default: 'default,round-robin,prefix-trie,least-connections' },
      embd: { type: 'string', default: '128' },
      layers: { type: 'string', default: '4' },
      ff: { type: 'string', default: '512' },
      heads: { type: 'string', default: '4' },
      threads: { type: 'string', default: '1' },
      cli: { type: 'string', default: 'src/cli.ts' },
      metrics: { type: 'string', default: 'vllm' },
      json: { type: 'string' },
    },
  });
  const num = (name: keyof typeof values, min: number, integer = true): number => {
    const raw = values[name];
    const n = Number(raw);
    if (typeof raw !== 'string' || !(integer ? Number.isInteger(n) : Number.isFinite(n)) || n < min)
      throw new Error(
        `--${name} must be ${integer ? 'an integer' : 'a number'} ≥ ${min} (got '${String(raw)}')`,
      );
    return n;
  };
  const engines = num('engines', 1);
  const slots = num('slots', 1);
  const docMin = num('doc-min', 1);
  const docMax = num('doc-max', docMin);
  const maxTokens = num('max-tokens', 1);
  const suffix = num('suffix', 1);
  const workload: Omit<PrefixWorkloadOptions, 'rate'> = {
    seed: num('seed', 0),
    documents: values.docs === undefined ? engines * slots : num('docs', 1),
    docMin,
    docMax,
    suffix,
    requests: num('requests', 1),
  };
  const shape: TinyLlamaShape = {
    embd: num('embd', 8),
    layers: num('layers', 1),
    ff: num('ff', 8),
    heads: num('heads', 1),
    kvHeads: num('heads', 1),
    // Room for the longest prompt (document, question, framing) and its output, per slot.
    contextLength: docMax + suffix + 64 + maxTokens,
    seed: workload.seed + 1,
  };
  if (shape.embd % shape.heads !== 0 || (shape.embd / shape.heads) % 2 !== 0)
    throw new Error('--embd must be a multiple of 2 × --heads');
  const policies = values.policies.split(',').filter((p) => p !== '');
  if (policies.length === 0) throw new Error('--policies lists none');
  if (values.metrics !== 'vllm' && values.metrics !== 'llamacpp')
    throw new Error(`--metrics must be vllm or llamacpp (got '${values.metrics}')`);
  return {
    engines,
    slots,
    rate: values.rate === undefined ? undefined : num('rate', 0.01, false),
    load: num('load', 0.01, false),
    maxTokens,
    workload,
    shape,
    threads: num('threads', 1),
    policies,
    cli: values.cli,
    metrics: values.metrics,
    json: values.json,
  };
}

// Children never outlive the bench, whichever way it ends.
const children = new Set<ChildProcess>();
const track = (c: ChildProcess): ChildProcess => {
  children.add(c);
  c.on('exit', () => children.delete(c));
  return c;
};
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => process.exit(130));

const stop = (p: ChildProcess): Promise<void> =>
  new Promise((r) => {
    if (p.exitCode !== null || p.signalCode !== null) return r();
    p.once('exit', () => r());
    p.kill('SIGTERM');
  });

/** One engine process, resolved with its URL once it listens. */
async function startEngine(model: string, args: string[]): Promise<{ proc: ChildProcess; url: string }> {
  const proc = track(
    fork(join(ROOT, 'bench/real-prefix/engine.ts'), [model, ...args], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    }),
  );
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const url = await new Promise<string>((res, rej) => {
    proc.on('message', (m) => {
      if (isReadyMessage(m)) res(m.urls[0]!);
    });
    proc.on('exit', (code) => rej(new Error(`engine exited ${code}: ${err.slice(-2000)}`)));
  });
  return { proc, url };
}

/** `llmlb serve` over the engines with one policy (undefined: the config default). */
async function startRouter(
  cli: string,
  dir: string,
  engines: readonly string[],
  policy: string | undefined,
): Promise<{ proc: ChildProcess; url: string }> {
  const cfg = join(dir, `llmlb-${policy ?? 'default'}.json`);
  await writeFile(
    cfg,
    JSON.stringify({
      server: { host: '127.0.0.1', port: 0 },
      backends: engines.map((url, i) => ({ name: `llama${i}`, url, api: 'openai', models: ['m'] })),
      ...(policy === undefined ? {} : { policy: { name: policy } }),
      log: { level: 'silent' },
    }),
  );
  const script = resolve(ROOT, cli);
  const argv = script.endsWith('.ts') ? ['--import', 'tsx', script] : [script];
  const proc = track(
    spawn(process.execPath, [...argv, 'serve', '--config', cfg], { stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const url = await new Promise<string>((res, rej) => {
    createInterface({ input: proc.stdout! }).on('line', (l) => {
      const m = /llmlb listening on (\S+)/.exec(l);
      if (m) res(m[1]!);
    });
    proc.on('exit', (code) => rej(new Error(`llmlb serve exited ${code}: ${err.slice(-2000)}`)));
  });
  // Until the first health probe answers, backends are not routable.
  for (let i = 0; i < 100; i++) {
    const r = await request(`${url}/readyz`).catch(() => undefined);
    const ok = r?.statusCode === 200;
    await r?.body.dump();
    if (ok) break;
    await sleep(100);
  }
  return { proc, url };
}

interface EngineStats {
  requests: number;
  promptTokens: number;
  reusedTokens: number;
  completionTokens: number;
}
async function engineStats(url: string): Promise<EngineStats> {
  const r = await request(`${url}/_engine/stats`);
  return (await r.body.json()) as EngineStats;
}

interface Outcome {
  ok: boolean;
  ttftS: number;
  e2eS: number;
  endS: number;
  tokens: number;
}

/** One streamed completion through the router: time to the first text chunk, and to the end. */
async function send(
  dispatcher: Agent,
  url: string,
  prompt: string,
  maxTokens: number,
  t0: number,
): Promise<Outcome> {
  const sent = performance.now();
  let first = 0;
  let tokens = 0;
  try {
    const r = await request(`${url}/v1/completions`, {
      method: 'POST',
      dispatcher,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'm',
        prompt,
        max_tokens: maxTokens,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      }),
      headersTimeout: 300_000,
      bodyTimeout: 300_000,
    });
    if (r.statusCode !== 200) {
      await r.body.dump();
      throw new Error(`status ${r.statusCode}`);
    }
    let buf = '';
    for await (const chunk of r.body) {
      buf += (chunk as Buffer).toString('utf8');
      let nl: number;
      while ((nl = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, nl);
        buf = buf.slice(nl + 2);
        if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
        const o = JSON.parse(ev.slice(6)) as {
          choices?: { text?: string }[];
          usage?: { completion_tokens?: number };
        };
        if (first === 0 && o.choices?.some((c) => typeof c.text === 'string' && c.text !== ''))
          first = performance.now();
        if (o.usage?.completion_tokens !== undefined) tokens = o.usage.completion_tokens;
      }
    }
    const end = performance.now();
    return {
      ok: first > 0,
      ttftS: (first - sent) / 1000,
      e2eS: (end - sent) / 1000,
      endS: (end - t0) / 1000,
      tokens,
    };
  } catch {
    return { ok: false, ttftS: 0, e2eS: 0, endS: 0, tokens: 0 };
  }
}

const quantile = (sorted: readonly number[], q: number): number =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

interface PolicyResult {
  policy: string;
  sent: number;
  failed: number;
  ttftP50S: number;
  ttftP90S: number;
  e2eMeanS: number;
  reqPerS: number;
  tokPerS: number;
  /** Prompt tokens the engines served from their slots' KV caches ÷ prompt tokens. */
  reuse: number;
  /** Measured requests per engine. */
  perEngine: number[];
}

/**
 * The fleet's request rate with no cache hits, measured now (the machine may be shared): every
 * engine at once serves two cold prompts of the documents' mean length, one after the other.
 */
async function calibrate(
  engines: readonly string[],
  tokens: number,
  maxTokens: number,
): Promise<{ serviceS: number; capacity: number }> {
  const times: number[] = [];
  await Promise.all(
    engines.map(async (url, e) => {
      for (let k = 0; k < 2; k++) {
        const t = performance.now();
        const prompt = `Calibration ${e}.${k}: ` + 'abcdefghijklmnopqrstuvwxyz '.repeat(tokens / 27 + 1);
        const r = await request(`${url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', prompt: prompt.slice(0, tokens), max_tokens: maxTokens }),
        });
        if (r.statusCode !== 200) throw new Error(`calibration: ${await r.body.text()}`);
        await r.body.dump();
        times.push((performance.now() - t) / 1000);
      }
    }),
  );
  const serviceS = mean(times);
  return { serviceS, capacity: engines.length / serviceS };
}

async function runPolicy(
  o: ReturnType<typeof flags>,
  workload: PrefixWorkloadOptions,
  dir: string,
  engines: readonly string[],
  label: string,
  docs: readonly string[],
): Promise<PolicyResult> {
  for (const e of engines) {
    const r = await request(`${e}/_engine/reset`, { method: 'POST' });
    if (r.statusCode !== 200) throw new Error(`engine reset: ${await r.body.text()}`);
    await r.body.dump();
  }
  const router = await startRouter(o.cli, dir, engines, label === 'default' ? undefined : label);
  const dispatcher = new Agent({ connections: 512, keepAliveTimeout: 60_000 });
  try {
    // Warm-up: every document once, at the measured rate, through this policy.
    const t00 = performance.now();
    const warm: Promise<Outcome>[] = [];
    for (let d = 0; d < docs.length; d++) {
      await sleep(1000 / workload.rate);
      warm.push(send(dispatcher, router.url, `${docs[d]!}Warm-up.`, o.maxTokens, t00));
    }
    await Promise.all(warm);
    const before = await Promise.all(engines.map(engineStats));

    const reqs = prefixRequests(workload, docs);
    const t0 = performance.now();
    const outcomes = await Promise.all(
      reqs.map(async (q) => {
        const wait = t0 + q.at * 1000 - performance.now();
        if (wait > 0) await sleep(wait);
        return send(dispatcher, router.url, q.prompt, o.maxTokens, t0);
      }),
    );
    const after = await Promise.all(engines.map(engineStats));
    const ok = outcomes.filter((x) => x.ok);
    const ttft = ok.map((x) => x.ttftS).sort((a, b) => a - b);
    const spanS = Math.max(...ok.map((x) => x.endS));
    let prompt = 0;
    let reused = 0;
    for (let i = 0; i < engines.length; i++) {
      prompt += after[i]!.promptTokens - before[i]!.promptTokens;
      reused += after[i]!.reusedTokens - before[i]!.reusedTokens;
    }
    return {
      policy: label,
      sent: reqs.length,
      failed: reqs.length - ok.length,
      ttftP50S: quantile(ttft, 0.5),
      ttftP90S: quantile(ttft, 0.9),
      e2eMeanS: mean(ok.map((x) => x.e2eS)),
      reqPerS: ok.length / spanS,
      tokPerS: ok.reduce((a, x) => a + x.tokens, 0) / spanS,
      reuse: prompt > 0 ? reused / prompt : 0,
      perEngine: engines.map((_, i) => after[i]!.requests - before[i]!.requests),
    };
  } finally {
    await dispatcher.close();
    await stop(router.proc);
  }
}

function table(rows: readonly PolicyResult[]): string {
  const rr = rows.find((r) => r.policy === 'round-robin');
  const ratio = (v: number, base: number | undefined): string =>
    base === undefined || !(base > 0) ? '' : ` (${(v / base).toFixed(2)}×)`;
  const head =
    '| policy | TTFT p50 s | TTFT p90 s | E2E mean s | req/s | out tok/s | prompt tokens from cache | requests per engine | failed |';
  const lines = [head, '|---|---|---|---|---|---|---|---|---|'];
  for (const r of rows)
    lines.push(
      `| ${r.policy === 'default' ? `default (${DEFAULT_POLICY})` : r.policy} | ${r.ttftP50S.toFixed(3)}${ratio(r.ttftP50S, rr?.ttftP50S)} | ${r.ttftP90S.toFixed(3)}${ratio(r.ttftP90S, rr?.ttftP90S)} | ${r.e2eMeanS.toFixed(3)}${ratio(r.e2eMeanS, rr?.e2eMeanS)} | ${r.reqPerS.toFixed(2)}${ratio(r.reqPerS, rr?.reqPerS)} | ${r.tokPerS.toFixed(1)} | ${(100 * r.reuse).toFixed(0)} % | ${r.perEngine.join(' / ')} | ${r.failed} |`,
    );
  return lines.join('\n');
}

async function main(): Promise<void> {
  const o = flags();
  const dir = await mkdtemp(join(tmpdir(), 'llmlb-real-prefix-'));
  const started = performance.now();
  try {
    const model = join(dir, 'tiny-llama.gguf');
    const bytes = await writeTinyLlamaGguf(model, o.shape);
    const docs = prefixDocuments({ ...o.workload, rate: 1 });
    const ctx = o.shape.contextLength;
    const engines = await Promise.all(
      Array.from({ length: o.engines }, () =>
        startEngine(model, [
          '--slots',
          String(o.slots),
          '--ctx',
          String(ctx),
          '--threads',
          String(o.threads),
          '--metrics',
          o.metrics,
        ]),
      ),
    );
    const urls = engines.map((e) => e.url);
    const s = o.shape;
    let rate = o.rate;
    if (rate === undefined) {
      const meanDoc = Math.round((o.workload.docMin + o.workload.docMax) / 2);
      const c = await calibrate(urls, meanDoc, o.maxTokens);
      rate = Math.round(o.load * c.capacity * 100) / 100;
      console.log(
        `calibration: a cold ${meanDoc}-token prompt takes ${c.serviceS.toFixed(2)} s with every engine busy, so the fleet serves ≈ ${c.capacity.toFixed(2)} req/s without cache hits; rate = ${o.load} × that = ${rate}/s`,
      );
    }
    const w: PrefixWorkloadOptions = { ...o.workload, rate };
    console.log(
      `model: random llama, ${s.layers} layers × ${s.embd} wide (ff ${s.ff}, ${s.heads} heads), ${(parameterCount(s) / 1e6).toFixed(2)} M params, ${(bytes / 2 ** 20).toFixed(1)} MiB F32; ` +
        `${o.engines} engines × ${o.slots} slots × ${ctx} tokens, ${o.threads} thread(s) each`,
    );
    console.log(
      `client: ${w.documents} documents of ${w.docMin}–${w.docMax} tokens, ${w.suffix}-token questions, ${o.maxTokens} output tokens, ` +
        `${w.requests} requests, Poisson at ${w.rate}/s (seed ${w.seed}), after a warm-up of ${docs.length}`,
    );
    const rows: PolicyResult[] = [];
    for (const p of o.policies) {
      const r = await runPolicy(o, w, dir, urls, p, docs);
      rows.push(r);
      console.log(
        `  ${p}: TTFT p50 ${r.ttftP50S.toFixed(3)} s, p90 ${r.ttftP90S.toFixed(3)} s, E2E ${r.e2eMeanS.toFixed(3)} s, ${r.reqPerS.toFixed(2)} req/s, cache ${(100 * r.reuse).toFixed(0)} %, engines ${r.perEngine.join('/')}, failed ${r.failed}`,
      );
    }
    console.log('\n' + table(rows));
    console.log(
      `\n(ratios to round-robin in parentheses; ${((performance.now() - started) / 1000).toFixed(0)} s in all)`,
    );
    if (o.json) await writeFile(o.json, JSON.stringify({ shape: o.shape, workload: w, rows }, null, 2));
    await Promise.all(engines.map((e) => stop(e.proc)));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
