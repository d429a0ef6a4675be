import { engineWaiting } from '../core/engine-load.js';
import type { BackendView } from '../core/types.js';

/**
 * Local replicas available to take one more request (SkyLB Algorithm 1, lines 3–8): healthy,
 * below their cap, and with no request pending in the engine by the last probe corrected by this
 * router's own pushes since (what the SP-P filter checks). A replica that never reported metrics
 * counts as available while this router has nothing in flight there.
 *
 * `kvBelow` < 1 (what a router tells its peers, `federation.lendKvBelow`): only replicas whose KV
 * cache was less full than that at the last scrape count — peers get spare capacity, not the room
 * this region's own conversations keep their prefix cache in (docs/results.md, issue #19).
 */
export function availableReplicas(views: readonly BackendView[], now: number, kvBelow = 1): number {
  let n = 0;
  for (const b of views) {
    if (!b.healthy || b.draining || b.inFlight >= b.maxConcurrency) continue;
    if (kvBelow < 1 && (b.metrics?.kvUsage ?? 0) >= kvBelow) continue;
    const w = engineWaiting(b, now, Infinity);
    if (w >= 0 ? w === 0 : b.inFlight < 1) n++;
  }
  return n;
}
