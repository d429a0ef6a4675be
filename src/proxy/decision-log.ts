import type { Logger } from 'pino';
import type { ScoreExplanation } from '../core/policies/framework/plugin.js';
import { ProfilePolicy } from '../core/policies/framework/profile.js';
import type { Decision, Policy, RequestClass, RequestInfo } from '../core/types.js';

/** One routing decision, kept for GET /admin/decisions. */
export interface DecisionRecord {
  readonly at: string;
  readonly requestId: string;
  readonly model: string;
  readonly policy: string;
  readonly backend: string | null;
  readonly outcome: 'dispatch' | 'reject';
  readonly reason?: string;
  readonly queuedMs: number;
  readonly attempt: number;
  /**
   * The performance-aware router's class of the request (LL / LH / HL / HH) on the chosen backend, from that backend's
   * learned speed (WorkloadTracker.classOf); null when the policy does not track workload, or on a
   * reject.
   */
  readonly class: RequestClass | null;
  /** The profile's scores for this decision: per scorer, per candidate backend. */
  readonly scores?: ScoreExplanation;
}

export type StoredDecision = Omit<DecisionRecord, 'at'> & { readonly atMs: number };

const DECISIONS_KEPT = 1000;
/** Decisions a second that carry their scores (outside debug level, where all do). */
const EXPLAINED_PER_S = 200;

/**
 * The requests waiting on a scheduler decision, and the decisions that wake them. A decision made
 * at once during submit() needs no waiter: the caller reads it from the returned list.
 */
export class DecisionWaiters {
  private readonly waiters = new Map<string, (d: Decision) => void>();
  /** The request whose submit() is running: its decision may come back at once. */
  submitting: string | undefined;

  apply(ds: readonly Decision[]): void {
    for (const d of ds) {
      const w = this.waiters.get(d.request.id);
      if (w) {
        this.waiters.delete(d.request.id);
        w(d);
      }
    }
  }

  wait(id: string): Promise<Decision> {
    return new Promise((resolve) => this.waiters.set(id, resolve));
  }

  drop(id: string): void {
    this.waiters.delete(id);
  }

  /** Whether this request is being decided now (submitting, or held in the router queue). */
  awaits(id: string): boolean {
    return id === this.submitting || this.waiters.has(id);
  }
}

/**
 * The last DECISIONS_KEPT decisions (a ring, formatted only when read) and the profiles' score
 * explanations. An explanation costs a few µs per pick (arrays of every scorer's scores), so outside
 * debug level at most EXPLAINED_PER_S decisions a second carry one: all of them at ordinary rates,
 * a sample when the router runs flat out.
 */
export class DecisionLog {
  private readonly ring: StoredDecision[] = [];
  private next = 0;
  private readonly explanations = new Map<string, ScoreExplanation>();
  /** The current policy when it is a profile (its decisions can be explained). */
  private profile: ProfilePolicy | undefined;
  /** The current policy (for the request classes it tracks). */
  private policy: Policy | undefined;
  private tokens = EXPLAINED_PER_S;
  private refilledAt = 0;

  constructor(
    private readonly waiters: DecisionWaiters,
    private readonly log: Logger,
    private readonly clock: () => number,
  ) {}

  /** Hooks a new policy's explanations (profiles only) and returns it. */
  explained(policy: Policy): Policy {
    this.policy = policy;
    this.profile = policy instanceof ProfilePolicy ? policy : undefined;
    if (this.profile) this.profile.explain = this.hook;
    return policy;
  }

  private readonly hook = (e: ScoreExplanation, req: RequestInfo): void => {
    // Only for requests waiting on a decision (a held one is explained again when it goes).
    if (!this.waiters.awaits(req.id)) return;
    this.explanations.set(req.id, e);
    if (--this.tokens < 1 && this.profile && !this.log.isLevelEnabled('debug')) {
      this.profile.explain = undefined;
      this.refilledAt = this.clock(); // refills from here
    }
  };

  /** The class a dispatched request got on `backend` (core request id); null when unknown. */
  classOf(id: string, backend: string): RequestClass | null {
    return this.policy?.requestClass?.(id, backend) ?? null;
  }

  /** Turns explanations back on once the budget has refilled. */
  rearm(t: number): void {
    const p = this.profile;
    if (!p || p.explain) return;
    this.tokens = Math.min(EXPLAINED_PER_S, this.tokens + ((t - this.refilledAt) * EXPLAINED_PER_S) / 1000);
    this.refilledAt = t;
    if (this.tokens >= 1) p.explain = this.hook;
  }

  /** The explanation of this request's latest decision, removed as it is read. */
  take(id: string): ScoreExplanation | undefined {
    const e = this.explanations.get(id);
    if (e) this.explanations.delete(id);
    return e;
  }

  forget(id: string): void {
    this.explanations.delete(id);
  }

  record(rec: StoredDecision): void {
    this.ring[this.next % DECISIONS_KEPT] = rec;
    this.next = (this.next + 1) % DECISIONS_KEPT;
  }

  /** The newest `limit` decisions, newest first. */
  list(limit: number): { decisions: DecisionRecord[] } {
    const n = Math.min(limit, this.ring.length);
    const out: DecisionRecord[] = [];
    for (let i = 1; i <= n; i++) {
      const { atMs, ...rec } = this.ring[(this.next - i + DECISIONS_KEPT * 2) % DECISIONS_KEPT]!;
      out.push({ at: new Date(atMs).toISOString(), ...rec });
    }
    return { decisions: out };
  }
}
