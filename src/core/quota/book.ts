import { AdviceWindow, type Advice } from './advice.js';
import { tryAdmit, type AdmitRequest, type AdmitResult } from './admit.js';
import { QuotaInputError } from './errors.js';
import { LeaseTable, reclaimLease, releaseLease, type Lease } from './lease.js';
import type { QuotaLimits } from './limits.js';
import { resolveOptions, type QuotaOptions } from './options.js';
import { capacityOf, snapshotState, type QuotaSnapshot } from './snapshot.js';
import { applyLimits, createQuotaState, patchLimits, type QuotaState } from './state.js';

/**
 * The whole quota core in one object: per-key state, the lease table and the advice window.
 * Pure: every call takes `now` (ms, any monotonic or epoch origin, used consistently) and ids and
 * randomness come from the caller. The in-memory QuotaStore wraps one of these.
 */
export class QuotaBook {
  readonly options: QuotaOptions;
  readonly state: QuotaState;
  readonly #leases = new LeaseTable();
  readonly #advice = new AdviceWindow();

  constructor(limits: Record<string, QuotaLimits> = {}, options: Partial<QuotaOptions> = {}) {
    this.options = resolveOptions(options);
    this.state = createQuotaState(limits);
  }

  /** Admit (returns the lease, also kept here) or say how long to wait. See tryAdmit for throws. */
  acquire(req: AdmitRequest, leaseId: string, now: number, random: () => number): AdmitResult {
    if (this.#leases.get(leaseId)) throw new QuotaInputError(`lease id ${leaseId} is already in use`);
    const r = tryAdmit(this.state, req, leaseId, now, this.options, random);
    if (r.kind === 'admitted') this.#leases.add(r.lease);
    this.#advice.record(now, r.kind === 'admitted' ? null : r.waitForMs);
    return r;
  }

  /** Release an admitted lease. Unknown or already released → LeaseNotFoundError, nothing changes. */
  complete(leaseId: string, now: number): Lease {
    const l = this.#leases.take(leaseId);
    releaseLease(this.state, l, now);
    return l;
  }

  /** Extend a lease by the TTL from now. Unknown → LeaseNotFoundError. */
  heartbeat(leaseId: string, now: number): Lease {
    return { ...this.#leases.heartbeat(leaseId, now, this.options.leaseTtlMs) };
  }

  /** Reclaim every lease whose TTL ran out: frees the slot, refunds tokens and deficit. */
  reclaimExpired(now: number): Lease[] {
    const expired = this.#leases.takeExpired(now);
    for (const l of expired) reclaimLease(this.state, l, this.options);
    return expired;
  }

  /** Follow a whole configuration (reload). In-flight leases keep counting. */
  configure(limits: Record<string, QuotaLimits>): void {
    applyLimits(this.state, limits);
  }

  /** Change some limits of one model (admin). */
  setLimits(model: string, patch: Partial<QuotaLimits>): QuotaLimits {
    return { ...patchLimits(this.state, model, patch) };
  }

  snapshot(now: number): QuotaSnapshot[] {
    return snapshotState(this.state, now, this.options.tickMs);
  }

  advice(now: number): Advice {
    const c = capacityOf(this.state);
    return this.#advice.compute(now, c.inFlight, c.capacity);
  }

  get leaseCount(): number {
    return this.#leases.size;
  }

  lease(id: string): Lease | undefined {
    const l = this.#leases.get(id);
    return l && { ...l };
  }
}
