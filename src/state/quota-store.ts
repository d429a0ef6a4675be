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
 * LeaseNotFoundError), thrown with no state changed, or StoreUnavailableError when the shared
 * state can't be reached (hosts answer 503 + Retry-After).
 */
export interface QuotaStore {
  /** Admit now (the lease id is the quota-aware router's task_id) or say how long to wait. */
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
  /** Reachability and recovery counts (absent: a store that can't become unreachable). */
  health?(): StoreHealth;
  /** Check the shared state now and restore what it lost (reload, reconnect). */
  verify?(): Promise<void>;
}

export interface StoreHealth {
  /** False from the first failed command until the server answers again. */
  up: boolean;
  /** Up → down transitions so far (hosts log once per outage). */
  outages: number;
  /** Times the shared state was found lost or rolled back and rebuilt from configuration. */
  reseeds: number;
  /** Leases this replica put back after the shared state lost them. */
  reregistered: number;
}

/** What a store reports as it happens, for the host's log and counters. */
export type StoreEvent =
  | { kind: 'down'; error: string }
  | { kind: 'up' }
  | { kind: 'reseeded'; reason: 'lost' | 'rolled_back' | 'unversioned'; models: number; leases: number }
  | { kind: 'reregistered'; leases: number };

/** The shared state can't be reached (connection down, command timed out, server loading). */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
  readonly code = 'store_unavailable';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** What hosts inject: the clock (ms since epoch: replicas share Redis, so they share an origin). */
export interface StoreEnv {
  now: () => number;
  random: () => number;
  newId: () => string;
}
