import type {
  Advice,
  AdmitRequest,
  AdmitResult,
  Lease,
  QuotaLimits,
  QuotaSnapshot,
} from '../core/quota/index.js';

/**
 * Where quota state and leases live. Same semantics for every implementation (one behavioural
 * suite runs against each): the in-memory store for a single router, Redis for replicas that
 * must share quotas and leases with zero over-admission.
 *
 * Errors are the core's typed ones (QuotaInputError, UnknownModelError, TooLargeError,
 * LeaseNotFoundError), thrown with no state changed.
 */
export interface QuotaStore {
  /** Admit now (the lease id is seed 001's task_id) or say how long to wait. */
  acquire(req: AdmitRequest): Promise<AdmitResult>;
  /** Release; an unknown, completed or reclaimed id throws LeaseNotFoundError. */
  complete(leaseId: string): Promise<Lease>;
  /** Extend the lease to now + TTL; unknown id throws LeaseNotFoundError. */
  heartbeat(leaseId: string): Promise<Lease>;
  /** Reclaim leases past their TTL (frees slots, refunds tokens and deficit). */
  reclaimExpired(): Promise<Lease[]>;
  /** Follow a whole configuration (startup, reload); in-flight leases keep counting. */
  configure(limits: Record<string, QuotaLimits>): Promise<void>;
  /** Change some limits of one model (admin). */
  setLimits(model: string, patch: Partial<QuotaLimits>): Promise<QuotaLimits>;
  snapshot(): Promise<QuotaSnapshot[]>;
  advice(): Promise<Advice>;
  close(): Promise<void>;
}

/** What hosts inject: the clock (ms since epoch: replicas share Redis, so they share an origin). */
export interface StoreEnv {
  now: () => number;
  random: () => number;
  newId: () => string;
}
