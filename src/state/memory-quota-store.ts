import { randomUUID } from 'node:crypto';
import {
  QuotaBook,
  type Advice,
  type AdmitRequest,
  type AdmitResult,
  type Lease,
  type QuotaLimits,
  type QuotaOptions,
  type QuotaSnapshot,
} from '../core/quota/index.js';
import type { QuotaStore, StoreEnv } from './quota-store.js';

/** Single-process store: the pure QuotaBook plus a clock. The default when `state.redis` is absent. */
export class MemoryQuotaStore implements QuotaStore {
  readonly #book: QuotaBook;
  readonly #env: StoreEnv;

  constructor(
    limits: Record<string, QuotaLimits>,
    options: Partial<QuotaOptions> = {},
    env: Partial<StoreEnv> = {},
  ) {
    this.#book = new QuotaBook(limits, options);
    this.#env = { now: Date.now, random: Math.random, newId: () => `tsk_${randomUUID()}`, ...env };
  }

  async acquire(req: AdmitRequest): Promise<AdmitResult> {
    return this.#book.acquire(req, this.#env.newId(), this.#env.now(), this.#env.random);
  }
  async complete(leaseId: string): Promise<Lease> {
    return this.#book.complete(leaseId, this.#env.now());
  }
  async heartbeat(leaseId: string): Promise<Lease> {
    return this.#book.heartbeat(leaseId, this.#env.now());
  }
  async reclaimExpired(): Promise<Lease[]> {
    return this.#book.reclaimExpired(this.#env.now());
  }
  async configure(limits: Record<string, QuotaLimits>): Promise<void> {
    this.#book.configure(limits);
  }
  async setLimits(model: string, patch: Partial<QuotaLimits>): Promise<QuotaLimits> {
    return this.#book.setLimits(model, patch);
  }
  async snapshot(): Promise<QuotaSnapshot[]> {
    return this.#book.snapshot(this.#env.now());
  }
  async advice(): Promise<Advice> {
    return this.#book.advice(this.#env.now());
  }
  async close(): Promise<void> {}
}
