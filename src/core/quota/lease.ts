import { LeaseNotFoundError } from './errors.js';
import type { QuotaOptions } from './options.js';
import { modelQuota, type QuotaState } from './state.js';
import { deficitCap } from './wdrr.js';
import { refundTokens } from './window.js';

/** An admission handle (the quota-aware router's task_id). JSON-safe. */
export interface Lease {
  id: string;
  model: string;
  tokens: number;
  admittedAt: number;
  /** Reclaimed after this unless heartbeated. */
  expiresAt: number;
  /** Window slot the tokens were charged to (for refunds). */
  tick: number;
}

const EMA_ALPHA = 0.2;

function settle(state: QuotaState, model: string): void {
  const m = modelQuota(state, model);
  if (m && m.retired && m.inFlight === 0) delete state.models[model];
}

/** Completion: frees the slot. Tokens and the request stay charged (they were used). */
export function releaseLease(state: QuotaState, lease: Lease, now: number): void {
  const m = modelQuota(state, lease.model);
  if (!m) return;
  m.inFlight = Math.max(0, m.inFlight - 1);
  const held = Math.max(0, now - lease.admittedAt);
  m.meanHoldMs = m.meanHoldMs === null ? held : m.meanHoldMs + EMA_ALPHA * (held - m.meanHoldMs);
  settle(state, lease.model);
}

/**
 * Expiry (no heartbeat within the TTL): frees the slot and refunds the tokens and deficit, as
 * the quota-aware router prescribes, so abandoned work can be admitted again. The request count stays charged:
 * the call may well have reached the model, and requests are the cheaper target to honour.
 */
export function reclaimLease(
  state: QuotaState,
  lease: Lease,
  opts: Pick<QuotaOptions, 'tickMs' | 'quantumTokens'>,
): void {
  const m = modelQuota(state, lease.model);
  if (!m) return;
  m.inFlight = Math.max(0, m.inFlight - 1);
  refundTokens(m.slots, lease.tick, lease.tokens);
  m.deficit = Math.min(
    deficitCap(m.limits.weight, opts.quantumTokens, lease.tokens),
    m.deficit + lease.tokens,
  );
  settle(state, lease.model);
}

/** In-memory lease table: one owner for ids, so a second complete finds nothing to release. */
export class LeaseTable {
  readonly #leases = new Map<string, Lease>();

  get size(): number {
    return this.#leases.size;
  }

  add(lease: Lease): void {
    this.#leases.set(lease.id, lease);
  }

  get(id: string): Lease | undefined {
    return this.#leases.get(id);
  }

  /** Remove and return; throws LeaseNotFoundError for unknown / already removed ids. */
  take(id: string): Lease {
    const l = this.#leases.get(id);
    if (!l) throw new LeaseNotFoundError(id);
    this.#leases.delete(id);
    return l;
  }

  /** Extend a lease to now + ttl; throws LeaseNotFoundError. */
  heartbeat(id: string, now: number, ttlMs: number): Lease {
    const l = this.#leases.get(id);
    if (!l) throw new LeaseNotFoundError(id);
    l.expiresAt = Math.max(l.expiresAt, now + ttlMs);
    return l;
  }

  /** Remove and return every lease with expiresAt ≤ now. */
  takeExpired(now: number): Lease[] {
    const out: Lease[] = [];
    for (const l of this.#leases.values()) if (l.expiresAt <= now) out.push(l);
    for (const l of out) this.#leases.delete(l.id);
    return out;
  }

  values(): IterableIterator<Lease> {
    return this.#leases.values();
  }
}
