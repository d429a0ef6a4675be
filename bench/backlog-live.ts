/**
 * The live half of `npm run bench:backlog`: real HTTP and a real database, time-scaled. The models
 * backend runs in its own process (latency ÷ BACKLOG_TIME_SCALE). As-is: 20 workers post batches of
 * 10 to its batch endpoint and write answers to PGlite, with the 30-minute timeout scaled too.
 * llmlb: `llmlb serve` with per-model quotas in front of the backend, and the solver (PGlite) admitting
 * every prompt through the router's /schedule API and sending it alone through the router.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { request } from 'undici';
import { HttpAdmission, type Admission } from '../src/tasks/admission.js';
import { OpenAiCaller } from '../src/tasks/caller.js';
import { CoreAdmission } from '../src/tasks/core-admission.js';
import { countViolations, type CallRecord, type Violations } from '../src/sim/backlog/meter.js';
import { BACKLOG_MODELS, ESTIMATED_OUTPUT_TOKENS } from '../src/sim/backlog/scenario.js';
import { AS_IS, limitsOf } from '../src/sim/backlog/simulate.js';
import { Solver } from '../src/tasks/solver.js';
import { migrate, pgliteSql } from '../src/tasks/sql.js';
import { TaskStore } from '../src/tasks/store.js';
import { table, type Row } from './backlog-table.js';

const K = Number(process.env.BACKLOG_TIME_SCALE ?? 5);

// Children never outlive the bench, whichever way it ends.
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** Starts `node --import tsx <args>` and resolves with the first line matching `ready`. */
async function child(
  args: string[],
  ready: RegExp,
): Promise<{ proc: ChildProcess; match: RegExpMatchArray }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(proc);
  proc.on('exit', () => children.delete(proc));
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const match = await new Promise<RegExpMatchArray>((resolve, reject) => {
    createInterface({ input: proc.stdout! }).on('line', (l) => {
      const m = l.match(ready);
      if (m) resolve(m);
    });
    proc.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}: ${err.slice(-2000)}`)));
  });
  return { proc, match };
}

const stop = (p: ChildProcess): Promise<void> =>
  new Promise((r) => {
    if (p.exitCode !== null) return r();
    p.once('exit', () => r());
    p.kill('SIGTERM');
  });

async function backendCalls(url: string): Promise<{ calls: CallRecord[]; maxCallsPerPrompt: number }> {
  const r = await request(url + '/_backend/calls');
  return (await r.body.json()) as { calls: CallRecord[]; maxCallsPerPrompt: number };
}

async function freshStore(prompts: readonly string[]): Promise<TaskStore> {
  const sql = await pgliteSql();
  await migrate(sql);
  const store = new TaskStore(sql, { visibilityMs: 60_000 });
  for (let i = 0; i < prompts.length; i += 500)
    await store.add(prompts.slice(i, i + 500).map((p) => ({ prompt: p })));
  return store;
}

/** As-is, live: DAG runs of 20 workers × batches of 10 on the batch endpoint, timeout scaled by K. */
export async function liveAsIs(
  prompts: readonly string[],
  backend: string,
): Promise<{ drainS: number; wasted: number; solved: number }> {
  const store = await freshStore(prompts);
  const t0 = performance.now();
  let last = t0;
  let wasted = 0;
  for (let run = 0; ; run++) {
    const todo = await store.sql.query<{ id: string; prompt: string }>(
      `SELECT id, prompt FROM tasks WHERE status = 'queued' ORDER BY id`,
    );
    if (todo.length === 0 || run > 50) break;
    const share = Math.ceil(todo.length / AS_IS.workers);
    await Promise.all(
      Array.from({ length: AS_IS.workers }, async (_, w) => {
        const mine = todo.slice(w * share, (w + 1) * share);
        const deadline = performance.now() + (AS_IS.workerTimeoutS * 1000) / K;
        for (let b = 0; b < mine.length; b += AS_IS.batchSize) {
          const batch = mine.slice(b, b + AS_IS.batchSize);
          let answers: { answer: string }[];
          try {
            const res = await request(backend + '/batch', {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ prompts: batch.map((x) => x.prompt) }),
              signal: AbortSignal.timeout(Math.max(1, Math.ceil(deadline - performance.now()))),
            });
            answers = ((await res.body.json()) as { answers: { answer: string }[] }).answers;
          } catch (err) {
            const name = (err as Error).name;
            if (name !== 'TimeoutError' && name !== 'AbortError') throw err;
            wasted += batch.length; // the worker timed out: this batch's answers are never written
            return;
          }
          await store.sql.query(
            `UPDATE tasks SET status = 'done', answer = u.a, finished_at = now(), updated_at = now()
             FROM unnest($1::bigint[], $2::text[]) AS u(i, a) WHERE tasks.id = u.i`,
            [batch.map((x) => x.id), answers.map((a) => a.answer)],
          );
          last = performance.now();
        }
      }),
    );
  }
  const solved = (await store.counts()).done;
  await store.sql.close();
  return { drainS: ((last - t0) * K) / 1000, wasted, solved };
}

/** Router config: the backend, and the targets as quotas, rates scaled to real minutes. */
function routerConfig(backend: string, port: number, withQuotas = true): string {
  const quotas = Object.fromEntries(
    BACKLOG_MODELS.map((m) => [
      m.name,
      {
        weight: m.limits.weight,
        maxConcurrent: m.limits.maxConcurrent,
        tokensPerMinute: m.limits.tokensPerMinute * K,
        requestsPerMinute: m.limits.requestsPerMinute * K,
      },
    ]),
  );
  return JSON.stringify({
    server: { host: '127.0.0.1', port },
    backends: [
      { name: 'models-backend', url: backend, api: 'openai', models: BACKLOG_MODELS.map((m) => m.name) },
    ],
    policy: 'least-connections',
    ...(withQuotas ? { quotas: { models: quotas }, admission: { leaseTtlMs: 30_000 } } : {}),
  });
}

async function liveLlmlb(
  prompts: readonly string[],
  modelsUrl: string,
  admission: Admission,
): Promise<{ drainS: number; solved: number; peakWorkers: number; waits: number }> {
  const store = await freshStore(prompts);
  const caller = new OpenAiCaller(modelsUrl);
  const t0 = performance.now();
  let last = t0;
  const solver = new Solver({
    store,
    admission,
    caller,
    workerId: 'bench',
    maxWorkers: 256,
    adviceIntervalMs: Math.max(20, 1000 / K),
    pollMs: 20,
    leaseHeartbeatMs: 1_000,
    estimatedOutputTokens: ESTIMATED_OUTPUT_TOKENS,
    drain: true,
    onEvent: (e) => {
      if (e.type === 'solved') last = performance.now();
    },
  });
  const stats = await solver.run();
  const solved = (await store.counts()).done;
  await caller.close();
  await store.sql.close();
  return {
    drainS: ((last - t0) * K) / 1000,
    solved,
    peakWorkers: stats.peakWorkers,
    waits: stats.admissionWaits,
  };
}

export async function runLive(
  prompts: readonly string[],
): Promise<{ text: string; results: Record<string, unknown> }> {
  const limits = limitsOf(BACKLOG_MODELS);
  // The router's rolling window is 60 real seconds = K model-minutes; rate targets there are × K.
  const routerLimits = Object.fromEntries(
    Object.entries(limits).map(([k, l]) => [
      k,
      { ...l, requestsPerMinute: l.requestsPerMinute * K, tokensPerMinute: l.tokensPerMinute * K },
    ]),
  );
  const dir = await mkdtemp(join(tmpdir(), 'llmlb-backlog-'));
  const out: Record<string, unknown> = { timeScale: K, tasks: prompts.length };
  try {
    // As-is.
    let be = await child(['bench/backlog-backend-child.ts', String(K)], /^backend (\S+)/);
    const asIs = await liveAsIs(prompts, be.match[1]!);
    const asIsCalls = await backendCalls(be.match[1]!);
    await stop(be.proc);

    // llmlb: a fresh backend, the router with quotas, the solver.
    be = await child(['bench/backlog-backend-child.ts', String(K)], /^backend (\S+)/);
    const cfg = join(dir, 'router.json');
    await writeFile(cfg, routerConfig(be.match[1]!, 0));
    let router: Awaited<ReturnType<typeof child>>;
    try {
      router = await child(['src/cli.ts', 'serve', '--config', cfg], /llmlb listening on (\S+)/);
    } catch {
      // A router without the quotas/admission config keys: route only, admission in-process below.
      await writeFile(cfg, routerConfig(be.match[1]!, 0, false));
      router = await child(['src/cli.ts', 'serve', '--config', cfg], /llmlb listening on (\S+)/);
    }
    const routerUrl = router.match[1]!;
    // Primary: admission on the model clock (exact one-minute model windows), models via the router.
    // Ticks of 100 real ms (the router's default), i.e. 100·K model ms: the window is conservative by
    // up to a tick, which absorbs the real-time jitter between admission and the call reaching the
    // backend (K× larger in model time).
    const core = new CoreAdmission(limits, {
      now: () => performance.now(),
      timeScale: K,
      quota: { tickMs: 100 * K },
    });
    const ll = await liveLlmlb(prompts, routerUrl, core);
    const llCalls = await backendCalls(be.match[1]!);
    // Also through the router's own admission API when this build has it (real-time windows).
    let viaRouter: { r: Awaited<ReturnType<typeof liveLlmlb>>; calls: CallRecord[] } | undefined;
    const http = new HttpAdmission(routerUrl);
    if (
      process.env.BACKLOG_ROUTER_ADMISSION !== '0' &&
      (await http.advice().then(
        () => true,
        () => false,
      ))
    ) {
      await stop(be.proc);
      await stop(router.proc);
      be = await child(['bench/backlog-backend-child.ts', String(K)], /^backend (\S+)/);
      await writeFile(cfg, routerConfig(be.match[1]!, 0));
      router = await child(['src/cli.ts', 'serve', '--config', cfg], /llmlb listening on (\S+)/);
      // The quota-aware router's flow: admission from the router, then the call straight to the Models Backend. Through
      // the router, this build's proxy-path gate would take a second lease for the same call.
      const r = await liveLlmlb(prompts, be.match[1]!, new HttpAdmission(router.match[1]!));
      viaRouter = { r, calls: (await backendCalls(be.match[1]!)).calls };
    }
    await stop(router.proc);
    await stop(be.proc);

    const row = (
      name: string,
      r: { drainS: number; solved: number },
      calls: CallRecord[],
      v: Violations,
      extra: Partial<Row>,
    ): Row => ({
      name,
      drainS: r.drainS,
      solved: r.solved,
      calls: calls.length,
      wastedCalls: 0,
      peakWorkers: 0,
      violations: v,
      ...extra,
    });
    // Concurrency is exact at any scale; rates are checked per model-minute (the target as written)
    // and per router window (60 real s = K model-minutes, targets × K), which is what the router enforces.
    const modelMin = (c: CallRecord[]): Violations => countViolations(c, limits, 60_000);
    const routerMin = (c: CallRecord[]): Violations => countViolations(c, routerLimits, 60_000 * K);
    const a = row('as-is', asIs, asIsCalls.calls, modelMin(asIsCalls.calls), {
      wastedCalls: asIs.wasted,
      peakWorkers: AS_IS.workers,
    });
    const l = row('llmlb', ll, llCalls.calls, modelMin(llCalls.calls), { peakWorkers: ll.peakWorkers });
    const verdict = (asIs: Row, llmlb: Row): string =>
      `goals: llmlb 0 violations → ${llmlb.violations.total === 0 ? 'met' : 'NOT met'}; ` +
      `drain ≥ 2× faster → ${asIs.drainS / llmlb.drainS >= 2 ? 'met' : 'NOT met'} (${(asIs.drainS / llmlb.drainS).toFixed(2)}×)\n`;
    let text =
      `live (real HTTP, PGlite, time-scaled: 1 model s = ${(1000 / K).toFixed(0)} real ms, ${prompts.length} tasks; ` +
      `most calls of one prompt: as-is ${asIsCalls.maxCallsPerPrompt}, llmlb ${llCalls.maxCallsPerPrompt})\n` +
      table(
        'live: solver admitted by the quota core on the model clock, every prompt through `llmlb serve`; violations per model-minute',
        a,
        l,
      ) +
      verdict(a, l);
    Object.assign(out, { asIs: a, llmlb: l, admissionWaits: ll.waits });
    if (viaRouter) {
      const v = row('llmlb', viaRouter.r, viaRouter.calls, routerMin(viaRouter.calls), {
        peakWorkers: viaRouter.r.peakWorkers,
      });
      const vm = { ...v, violations: modelMin(viaRouter.calls) };
      const a2 = { ...a, violations: routerMin(asIsCalls.calls) };
      text +=
        table(
          `live: solver admitted by the router's /schedule API (calls straight to the backend); violations per router window (60 real s = ${K} model-minutes, rate targets × ${K})`,
          a2,
          v,
        ) +
        verdict(a2, v) +
        `  (per model-minute, which a real-time router window cannot see at this time scale: ${vm.violations.total} ` +
        `(${vm.violations.requests} req, ${vm.violations.tokens} tok, ${vm.violations.concurrency} conc))\n`;
      Object.assign(out, {
        viaRouterApi: { llmlb: v, llmlbPerModelMinute: vm.violations, asIsRouterWindow: a2.violations },
      });
    } else {
      text += '  (this router build has no /schedule API: the router-admission run was skipped)\n';
    }
    return { text, results: out };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
