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
export class CoreAdmission implements Admission {
  readonly book: QuotaBook;

  constructor(
    limits: Record<string, QuotaLimits>,
    options: Partial<QuotaOptions> = {},
    private readonly now: () => number = Date.now,
    private readonly random: () => number = Math.random,
  ) {
    this.book = new QuotaBook(limits, options);
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
        : { wait_for_ms: r.waitForMs },
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
