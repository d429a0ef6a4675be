import { randomUUID } from 'node:crypto';
import { QuotaBook } from '../core/quota/book.js';
import type { QuotaLimits } from '../core/quota/limits.js';
import type { QuotaOptions } from '../core/quota/options.js';
import type { Admission, Advice, ScheduleResult } from './admission.js';

/**
 * Admission in-process over the pure quota core, on the real clock: what the router's admission
 * API does, for a single solver process that owns its quotas (and for benchmarks without a router
 * in the admission path). Several processes sharing quotas need the router's API instead.
 */
export interface CoreAdmissionOptions {
  readonly quota?: Partial<QuotaOptions>;
  /** Clock in ms (default Date.now). */
  readonly now?: () => number;
  readonly random?: () => number;
  /**
   * Model time per real time (default 1). Benchmarks that run models k× faster than life pass k:
   * the core then sees model time (its one-minute windows are model minutes) and wait hints are
   * divided by k before the solver sleeps on them.
   */
  readonly timeScale?: number;
}

export class CoreAdmission implements Admission {
  readonly book: QuotaBook;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly scale: number;

  constructor(limits: Record<string, QuotaLimits>, o: CoreAdmissionOptions = {}) {
    this.book = new QuotaBook(limits, o.quota ?? {});
    this.scale = o.timeScale ?? 1;
    if (!(this.scale > 0) || !Number.isFinite(this.scale))
      throw new Error('timeScale must be a positive number');
    const clock = o.now ?? Date.now;
    this.now = this.scale === 1 ? clock : () => clock() * this.scale;
    this.random = o.random ?? Math.random;
  }

  schedule(estimatedTokens: number, model?: string): Promise<ScheduleResult> {
    const now = this.now();
    // No background reclaimer here: expired leases are collected whenever someone asks.
    this.book.reclaimExpired(now);
    const r = this.book.acquire(
      { tokens: estimatedTokens, ...(model !== undefined ? { model } : {}) },
      `tsk_${randomUUID()}`,
      now,
      this.random,
    );
    return Promise.resolve(
      r.kind === 'admitted'
        ? { model_backend_id: r.lease.model, task_id: r.lease.id }
        : { wait_for_ms: Math.max(1, Math.round(r.waitForMs / this.scale)) },
    );
  }

  heartbeat(leaseId: string): Promise<boolean> {
    try {
      this.book.heartbeat(leaseId, this.now());
      return Promise.resolve(true);
    } catch {
      return Promise.resolve(false);
    }
  }

  complete(leaseId: string): Promise<boolean> {
    try {
      this.book.complete(leaseId, this.now());
      return Promise.resolve(true);
    } catch {
      return Promise.resolve(false);
    }
  }

  advice(): Promise<Advice> {
    const now = this.now();
    this.book.reclaimExpired(now);
    return Promise.resolve(this.book.advice(now));
  }
}
