/**
 * Federation of routers (SkyLB §3.1–§3.3): the wire constants of the live prober/forwarder, and
 * the pure types (defined in the core, where the config schema reads them too).
 */
export type { PeerSelection, PeerSpec, PeerStatus, RouteDecision } from '../core/federation-types.js';

/** Header a forwarded request carries: the receiving router never forwards it again. */
export const HOP_HEADER = 'x-llmlb-hop';

/** Path of the peer status endpoint. */
export const PEER_STATUS_PATH = '/federation/status';
