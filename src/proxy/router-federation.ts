import type { RouterConfig } from '../config/schema.js';
import { Federation } from '../federation/federation.js';
import { PeerProber } from '../federation/prober.js';
import { QueuedForwards } from '../federation/queue-forward.js';
import type { FederationHook } from './flight.js';

/** A router's peers (issue #19): the forwarding decision, its hook into the flight, its prober. */
export interface RouterFederation {
  readonly peers: Federation;
  readonly queuedForwards: QueuedForwards;
  readonly hook: FederationHook;
  readonly prober: PeerProber;
}

/**
 * The federation a router's settings ask for (`region` and `peers`), or undefined. `hasRoom`: a
 * local replica has no request pending (what keeps a request here).
 */
export function routerFederation(
  settings: RouterConfig,
  hasRoom: () => boolean,
): RouterFederation | undefined {
  if (settings.region === undefined || !settings.peers || settings.peers.length === 0) return undefined;
  const f = settings.federation;
  const fed = new Federation({
    region: settings.region,
    peers: settings.peers,
    // Both layers use the same policy family (SkyLB §3.2).
    selection: f?.peerSelection ?? (settings.policy.name === 'consistent-hash' ? 'ring' : 'trie'),
    tau: f?.tau,
    ejectMs: f?.ejectMs,
    maxEntries: f?.snapshotMaxEntries,
  });
  const forwards = new QueuedForwards(fed, hasRoom, Date.now);
  const hook: FederationHook = {
    route: (info, forwarded) => {
      forwards.drain(); // those queued earlier go first (FCFS)
      return fed.route(info, forwarded, hasRoom(), Date.now());
    },
    onForwarded: (info, peer) => fed.onForwarded(info, peer),
    onDone: (peer, ok) => fed.onDone(peer, ok, Date.now()),
    queued: (info, take) => forwards.add(info, take),
    unqueued: (id) => forwards.remove(id),
  };
  const prober = new PeerProber(fed, {
    intervalMs: f?.probeIntervalMs ?? 100,
    timeoutMs: f?.probeTimeoutMs,
    // A peer with room: the queue head goes there now rather than wait for a local replica.
    onStatus: () => forwards.drain(),
  });
  return { peers: fed, queuedForwards: forwards, hook, prober };
}
