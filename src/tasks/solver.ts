import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { AdmissionError, type Admission } from './admission.js';
import type { ModelCaller } from './caller.js';
import type { Claim, TaskStore } from './store.js';

export interface SolverOptions {
  readonly store: TaskStore;
  readonly admission: Admission;
  readonly caller: ModelCaller;
  /** Names this process's claims (`claimed_by`). */
  readonly workerId: string;
  /** Upper bound on concurrent workers, whatever /advice suggests. */
  readonly maxWorkers: number;
  readonly minWorkers?: number;
  /** How often /advice is read (default 1 s). */
  readonly adviceIntervalMs?: number;
  /** Sleep when nothing is claimable (default 500 ms; shorter when a retry is due sooner). */
  readonly pollMs?: number;
  /** Admission lease heartbeat period (default 10 s; keep it well under the router's lease TTL). */
  readonly leaseHeartbeatMs?: number;
  /** Output tokens assumed per prompt when estimating (default 256). */
  readonly estimatedOutputTokens?: number;
  /** Stop once nothing is queued or running (default: keep polling for new tasks). */
  readonly drain?: boolean;
  readonly signal?: AbortSignal;
  /** One line per event, for progress output and the crash test. */
  readonly onEvent?: (e: SolverEvent) => void;
}

export type SolverEvent =
  | { readonly type: 'solved'; readonly id: number; readonly model: string }
  | { readonly type: 'failed'; readonly id: number; readonly error: string; readonly status: string }
  | { readonly type: 'lost'; readonly id: number }
  | { readonly type: 'parallelism'; readonly target: number; readonly backpressure: number };

export interface SolverStats {
  solved: number;
  failed: number;
  /** Answers dropped because the claim had lapsed and another worker owned the task. */
  lostClaims: number;
  admissionWaits: number;
  peakWorkers: number;
  /** Why the run stopped early: the router cannot admit any task (it has no model quotas). */
  stoppedBy?: string;
}

/** A rough token count for admission: ~4 characters a token, plus the expected answer. */
export const estimateTokens = (prompt: string, output: number): number =>
  Math.ceil(prompt.length / 4) + output;

const isAbort = (err: unknown): boolean => err instanceof Error && err.name === 'AbortError';

/**
 * The backlog solver: workers each claim one task, wait for admission, call the model through
 * the router (one prompt, no batch to wait on), then write the answer under the claim token.
 * The number of workers follows /advice's `suggested_parallelism` within [min, max] workers.
 */
export class Solver {
  readonly stats: SolverStats = { solved: 0, failed: 0, lostClaims: 0, admissionWaits: 0, peakWorkers: 0 };
  private target: number;
  private active = 0;
  private nextWorker = 0;
  private done = false;
  private readonly stop = new AbortController();
  private readonly workers = new Set<Promise<void>>();
  private readonly minWorkers: number;

  constructor(private readonly o: SolverOptions) {
    if (!Number.isInteger(o.maxWorkers) || o.maxWorkers < 1)
      throw new Error('maxWorkers must be an integer ≥ 1');
    this.minWorkers = Math.min(o.minWorkers ?? 1, o.maxWorkers);
    this.target = this.minWorkers;
    // Every worker's sleep and model call listens on the one stop signal.
    setMaxListeners(0, this.stop.signal);
    o.signal?.addEventListener('abort', () => this.finish(), { once: true });
  }

  private finish(): void {
    this.done = true;
    this.stop.abort();
  }

  /** Runs until aborted, or (with `drain`) until the backlog is empty. */
  async run(): Promise<SolverStats> {
    const interval = this.o.adviceIntervalMs ?? 1_000;
    while (!this.done) {
      await this.readAdvice();
      while (this.active < this.target && !this.done) this.spawn();
      await sleep(interval, undefined, { signal: this.stop.signal }).catch(() => {});
    }
    await Promise.all(this.workers);
    return this.stats;
  }

  private async readAdvice(): Promise<void> {
    try {
      const a = await this.o.admission.advice();
      const t = Math.min(this.o.maxWorkers, Math.max(this.minWorkers, Math.round(a.suggested_parallelism)));
      if (t !== this.target)
        this.o.onEvent?.({ type: 'parallelism', target: t, backpressure: a.backpressure_score });
      this.target = t;
    } catch {
      // Router unreachable: keep the last target; admission itself will refuse or wait.
    }
  }

  private spawn(): void {
    const n = ++this.nextWorker;
    this.active++;
    this.stats.peakWorkers = Math.max(this.stats.peakWorkers, this.active);
    const p = this.worker(`${this.o.workerId}/${n}`).finally(() => {
      this.active--;
      this.workers.delete(p);
    });
    this.workers.add(p);
  }

  private async worker(name: string): Promise<void> {
    const { store } = this.o;
    // A worker above the advised target leaves between tasks, never in the middle of one.
    while (!this.done && this.active <= this.target) {
      let claim: Claim | undefined;
      try {
        [claim] = await store.claim(name, 1);
      } catch {
        await this.pause(this.o.pollMs ?? 500);
        continue;
      }
      if (claim) {
        await this.solve(claim);
        continue;
      }
      if (this.o.drain) {
        const c = await store.counts().catch(() => undefined);
        if (c && c.queued === 0 && c.running === 0) {
          this.finish();
          return;
        }
      }
      const next = await store.nextVisibleInMs().catch(() => null);
      await this.pause(Math.max(10, Math.min(this.o.pollMs ?? 500, next ?? Infinity)));
    }
  }

  private pause(ms: number): Promise<void> {
    return sleep(ms, undefined, { signal: this.stop.signal }).catch(() => {});
  }

  private async solve(claim: Claim): Promise<void> {
    const { store, admission, caller } = this.o;
    const task = claim.task;
    // The claim outlives a long wait or call only if it is renewed.
    const renew = setInterval(
      () => void store.extend(claim).catch(() => {}),
      Math.max(50, store.visibilityMs / 3),
    );
    let lease: { model: string; id: string } | undefined;
    let leaseBeat: NodeJS.Timeout | undefined;
    try {
      const est = estimateTokens(task.prompt, this.o.estimatedOutputTokens ?? 256);
      for (;;) {
        let r;
        try {
          r = await admission.schedule(est, task.model ?? undefined);
        } catch (err) {
          // A 404 for an unpinned task: the router has no quotas at all (or no admission API), its
          // setup and not the task's fault. Every task would end dead: give this one back, stop.
          if (err instanceof AdmissionError && err.status === 404 && task.model == null) {
            await store.release(claim).catch(() => {});
            this.stats.stoppedBy ??= err.message;
            this.finish();
            return;
          }
          // Refused for what the task is (unknown model, too large): a failed attempt, so it ends dead.
          if (err instanceof AdmissionError && err.rejected) throw err;
          // The router, not the task, is at fault: give the claim back without spending an attempt.
          await store.release(claim).catch(() => {});
          await this.pause(this.o.pollMs ?? 500);
          return;
        }
        if ('task_id' in r) {
          lease = { model: r.model_backend_id, id: r.task_id };
          break;
        }
        this.stats.admissionWaits++;
        await sleep(r.wait_for_ms, undefined, { signal: this.stop.signal });
      }
      const l = lease;
      leaseBeat = setInterval(
        () => void admission.heartbeat(l.id).catch(() => {}),
        this.o.leaseHeartbeatMs ?? 10_000,
      );
      let answer: string;
      try {
        answer = await caller.call(l.model, task.prompt, this.stop.signal, l.id);
      } finally {
        clearInterval(leaseBeat);
        // Free the model slot as soon as the call ends, before the database write.
        await admission.complete(l.id).catch(() => {});
      }
      if (await store.complete(claim, answer)) {
        this.stats.solved++;
        this.o.onEvent?.({ type: 'solved', id: task.id, model: l.model });
      } else {
        this.stats.lostClaims++;
        this.o.onEvent?.({ type: 'lost', id: task.id });
      }
    } catch (err) {
      if (isAbort(err) || this.done) {
        // Shutting down: the task goes back untouched for the next run.
        await store.release(claim).catch(() => {});
        return;
      }
      const msg = err instanceof Error ? err.message : String(err);
      const r = await store.fail(claim, msg).catch(() => null);
      this.stats.failed++;
      this.o.onEvent?.({ type: 'failed', id: task.id, error: msg, status: r?.status ?? 'lost' });
    } finally {
      clearInterval(renew);
    }
  }
}
