/**
 * Algorithm 1 at the head of the router queue (SkyLB §3.1–§3.3): a request that queued here
 * while no peer was available is forwarded as soon as one is, instead of waiting for a local
 * replica. The simulator (src/sim/federation.ts) and the live router (src/proxy/router.ts) both
 * keep their forwardable waiting requests here and drain it when a peer status comes in or a
 * request arrives. Pure: the host passes the clock and says how a request is handed over.
 */
import type { RequestInfo } from '../core/types.js';
import type { Federation } from './federation.js';
import type { RouteDecision } from './types.js';

export type PeerRoute = Extract<RouteDecision, { kind: 'peer' }>;

/**
 * Hands a waiting request to a peer: its router-queue place is released, and the host forwards it.
 * False when it no longer waits (dispatched, or its client left): nothing was handed over.
 */
export type TakeForPeer = (route: PeerRoute) => boolean;

interface Waiting {
  readonly id: string;
  readonly info: RequestInfo;
  readonly take: TakeForPeer;
}

export class QueuedForwards {
  /** Own clients' requests waiting in the router queue, oldest first (never hop-marked ones). */
  private readonly waiting = new Map<string, Waiting>();
  /** Requests forwarded from the queue since start. */
  forwarded = 0;

  constructor(
    private readonly federation: Federation,
    /** Some local replica is available (then the scheduler runs the head here). */
    private readonly localAvailable: () => boolean,
    private readonly clock: () => number,
  ) {}

  /** Waiting requests that may still be forwarded. */
  get size(): number {
    return this.waiting.size;
  }

  /** A request the host may forward later entered the router queue (again: it goes to the back). */
  add(info: RequestInfo, take: TakeForPeer): void {
    this.waiting.delete(info.id);
    this.waiting.set(info.id, { id: info.id, info, take });
  }

  /** It left the router queue (dispatched, rejected, its client left). */
  remove(id: string): void {
    this.waiting.delete(id);
  }

  /**
   * While no local replica is available and a peer is, the oldest waiting request goes to the
   * peer Federation.route picks (as many as the peers' room, τ, allows). Returns how many went.
   */
  drain(): number {
    let n = 0;
    while (this.waiting.size > 0 && !this.localAvailable()) {
      const next = this.head();
      if (!next) break;
      const [w, d] = next;
      this.waiting.delete(w.id);
      if (!w.take(d)) continue;
      // Counted at once: the next route must see the peer's room shrink.
      this.federation.onForwarded(w.info, d.peer);
      n++;
    }
    this.forwarded += n;
    return n;
  }

  /** The oldest waiting request and its peer; undefined when no peer has room. */
  private head(): [Waiting, PeerRoute] | undefined {
    const w = this.waiting.values().next().value!;
    const d = this.federation.route(w.info, false, false, this.clock());
    return d.kind === 'peer' ? [w, d] : undefined;
  }
}
