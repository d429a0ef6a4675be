/**
 * Federation of routers (SkyLB §3.1–§3.3): one router per region routes to its own replicas and
 * forwards to a peer router only when none of them is available. The pure types shared by the
 * config schema, the decision code, the live prober/forwarder and the simulator — here in the core
 * so the config layer names them without importing the federation host (src/federation/types.ts
 * re-exports them beside the wire constants).
 */

/** A peer router as configured (`peers: [{ name, url, region }]`). */
export interface PeerSpec {
  readonly name: string;
  readonly url: string;
  readonly region: string;
}

/** What a router's peer status endpoint answers (Algorithm 1, PROBELB). */
export interface PeerStatus {
  readonly region: string;
  /** Local replicas with no pending request (SP-P's availability, Algorithm 1 lines 3–8). */
  readonly availableReplicas: number;
  /** Requests held in the router's own queue. */
  readonly queueLength: number;
}

/** How peers are chosen once no local replica is available (SkyLB §3.2: same family as local). */
export type PeerSelection = 'trie' | 'ring';

/** The forwarding decision for one request. */
export type RouteDecision =
  { readonly kind: 'local' } | { readonly kind: 'peer'; readonly peer: string; readonly url: string };
