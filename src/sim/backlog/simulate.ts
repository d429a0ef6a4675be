/**
 * The backlog benchmark on virtual time: the as-is pipeline (fixed workers sending batches that
 * return with their slowest prompt, a worker timeout that abandons work, DAG restarts) and the llmlb
 * solver (workers following /advice, each prompt admitted by the pure quota core and sent alone).
 * Both drive the same scenario (latency per model and prompt), and every model call is recorded
 * for the violation meter.
 */
import { createRng } from '../../core/rng.js';
import { QuotaBook } from '../../core/quota/book.js';
import type { QuotaLimits } from '../../core/quota/limits.js';
import { EventHeap } from '../event-heap.js';
import { countViolations, type CallRecord, type Violations } from './meter.js';
import { estimatedTokens, latencyS, outputTokens, promptTokens, type BacklogModel } from './scenario.js';

export interface PipelineResult {
  readonly name: string;
  /** Time until every task had its answer written (model seconds); Infinity if some never did. */
  readonly drainS: number;
  readonly solved: number;
  readonly calls: number;
  /** Calls whose answer was thrown away (worker timeout). */
  readonly wastedCalls: number;
  readonly violations: Violations;
  readonly peakWorkers: number;
  readonly records: readonly CallRecord[];
}

export interface AsIsOptions {
  readonly workers: number;
  readonly batchSize: number;
  readonly workerTimeoutS: number;
}

export const AS_IS: AsIsOptions = { workers: 20, batchSize: 10, workerTimeoutS: 30 * 60 };

export const limitsOf = (models: readonly BacklogModel[]): Record<string, QuotaLimits> =>
  Object.fromEntries(models.map((m) => [m.name, { ...m.limits }]));

const callOf = (m: BacklogModel, prompt: string, startMs: number): CallRecord => ({
  model: m.name,
  startMs,
  endMs: startMs + latencyS(m, prompt) * 1000,
  tokens: promptTokens(prompt) + outputTokens(prompt),
});

/**
 * As-is (the quota-aware router): a DAG run takes every unsolved task, splits it into `workers` equal shares;
 * each worker sends its share in batches of `batchSize` to the batch endpoint (prompt i of a batch
 * on model i mod 10) and writes the answers when the whole batch returns. A worker still busy at
 * `workerTimeoutS` is killed: its batch's answers are lost (the models did the work anyway). When
 * every worker has finished or timed out, the DAG runs again on what is left.
 */
export function simulateAsIs(
  models: readonly BacklogModel[],
  prompts: readonly string[],
  o = AS_IS,
): PipelineResult {
  const solved = new Set<number>();
  const records: CallRecord[] = [];
  let wasted = 0;
  let t = 0;
  let drainMs = 0;
  for (let run = 0; solved.size < prompts.length; run++) {
    if (run > 1000) throw new Error('as-is pipeline does not converge');
    const todo = prompts.map((_, i) => i).filter((i) => !solved.has(i));
    const share = Math.ceil(todo.length / o.workers);
    let runEnd = t;
    for (let w = 0; w < o.workers; w++) {
      const mine = todo.slice(w * share, (w + 1) * share);
      const deadline = t + o.workerTimeoutS * 1000;
      let wt = t;
      for (let b = 0; b < mine.length; b += o.batchSize) {
        const batch = mine.slice(b, b + o.batchSize);
        const calls = batch.map((i, k) => callOf(models[k % models.length]!, prompts[i]!, wt));
        records.push(...calls);
        const end = Math.max(...calls.map((c) => c.endMs));
        if (end > deadline) {
          // Killed mid-batch: the calls ran to the end on the backend, but nobody wrote their answers.
          wasted += calls.length;
          wt = deadline;
          break;
        }
        for (const i of batch) solved.add(i);
        wt = end;
        drainMs = Math.max(drainMs, end);
      }
      runEnd = Math.max(runEnd, wt);
    }
    t = runEnd;
  }
  return {
    name: 'as-is',
    drainS: drainMs / 1000,
    solved: solved.size,
    calls: records.length,
    wastedCalls: wasted,
    violations: countViolations(records, limitsOf(models)),
    peakWorkers: o.workers,
    records,
  };
}

export interface LlmlbSimOptions {
  readonly maxWorkers: number;
  /** How often the solver reads /advice (model ms). */
  readonly adviceIntervalMs: number;
  readonly heartbeatMs: number;
  readonly seed: number;
}

export const LLMLB_SIM: LlmlbSimOptions = {
  maxWorkers: 256,
  adviceIntervalMs: 1_000,
  heartbeatMs: 10_000,
  seed: 1,
};

type Ev =
  | { t: number; kind: 'advice' }
  | { t: number; kind: 'reclaim' }
  | { t: number; kind: 'try'; w: number; task: number }
  | { t: number; kind: 'done'; w: number; task: number; lease: string }
  | { t: number; kind: 'beat'; lease: string };

/**
 * llmlb: the solver's loop on virtual time over the pure quota core (the same QuotaBook the router
 * uses). Workers claim tasks in order, ask for admission (waiting `wait_for_ms` when refused), call
 * the model the core picked, complete the lease and take the next task. The number of workers
 * follows `suggested_parallelism`, read every `adviceIntervalMs`; a worker above it leaves after its
 * current task. The router's reclaimer runs every second; long calls heartbeat their lease.
 */
export function simulateLlmlb(
  models: readonly BacklogModel[],
  prompts: readonly string[],
  o = LLMLB_SIM,
): PipelineResult {
  const byName = new Map(models.map((m) => [m.name, m]));
  const book = new QuotaBook(limitsOf(models));
  const rng = createRng(o.seed);
  const heap = new EventHeap<Ev>();
  const records: CallRecord[] = [];
  const push = (e: Ev, prio = 1): void => heap.push(e.t, prio, e);
  let nextTask = 0;
  let solved = 0;
  let drainMs = 0;
  let target = 1;
  let active = 0;
  let peak = 0;
  let nextWorker = 0;
  let leaseNo = 0;
  const live = new Set<string>();

  const startWorker = (t: number): void => {
    if (nextTask >= prompts.length) return;
    active++;
    peak = Math.max(peak, active);
    push({ t, kind: 'try', w: nextWorker++, task: nextTask++ });
  };
  // A worker that finished a task takes the next one, or leaves (backlog empty, or above target).
  const workerFree = (w: number, t: number): void => {
    if (nextTask < prompts.length && active <= target) push({ t, kind: 'try', w, task: nextTask++ });
    else active--;
  };

  push({ t: 0, kind: 'advice' }, 0);
  push({ t: 1000, kind: 'reclaim' }, 0);
  while (heap.size > 0) {
    const e = heap.pop()!;
    const t = e.t;
    switch (e.kind) {
      case 'advice': {
        const a = book.advice(t);
        target = Math.min(o.maxWorkers, Math.max(1, a.suggested_parallelism));
        while (active < target && nextTask < prompts.length) startWorker(t);
        if (solved < prompts.length) push({ t: t + o.adviceIntervalMs, kind: 'advice' }, 0);
        break;
      }
      case 'reclaim':
        book.reclaimExpired(t);
        if (solved < prompts.length) push({ t: t + 1000, kind: 'reclaim' }, 0);
        break;
      case 'try': {
        const prompt = prompts[e.task]!;
        const id = `l${++leaseNo}`;
        const r = book.acquire({ tokens: estimatedTokens(prompt) }, id, t, rng);
        if (r.kind === 'wait') {
          push({ t: t + r.waitForMs, kind: 'try', w: e.w, task: e.task });
          break;
        }
        const m = byName.get(r.lease.model)!;
        const call = callOf(m, prompt, t);
        records.push(call);
        live.add(id);
        push({ t: call.endMs, kind: 'done', w: e.w, task: e.task, lease: id });
        if (call.endMs - t > o.heartbeatMs) push({ t: t + o.heartbeatMs, kind: 'beat', lease: id }, 0);
        break;
      }
      case 'beat':
        if (live.has(e.lease)) {
          book.heartbeat(e.lease, t);
          push({ t: t + o.heartbeatMs, kind: 'beat', lease: e.lease }, 0);
        }
        break;
      case 'done':
        live.delete(e.lease);
        book.complete(e.lease, t);
        solved++;
        drainMs = Math.max(drainMs, t);
        workerFree(e.w, t);
        break;
    }
  }
  return {
    name: 'llmlb',
    drainS: solved === prompts.length ? drainMs / 1000 : Infinity,
    solved,
    calls: records.length,
    wastedCalls: 0,
    violations: countViolations(records, limitsOf(models)),
    peakWorkers: peak,
    records,
  };
}
