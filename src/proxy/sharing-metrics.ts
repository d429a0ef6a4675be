import { Gauge, type Registry } from 'prom-client';
import type { SharedState } from '../state/shared-state.js';
import type { SharedView } from '../state/shared-view.js';

/**
 * /metrics for several routers on one fleet: the shared view's (sharedView, or serve --workers N)
 * and the shared state's (sharedState), registered on the router's registry.
 */
export function registerSharingMetrics(
  registry: Registry,
  view: SharedView | undefined,
  state: SharedState | undefined,
  allowanceWaits: { readonly count: number; readonly totalMs: number },
): void {
  if (view) {
    new Gauge({
      name: 'llmlb_shared_view_up',
      help: '1 while the shared in-flight view reaches Redis (or, serve --workers N, the primary; summed over workers); 0: this router routes on its own view',
      registers: [registry],
      collect() {
        this.set(view.up ? 1 : 0);
      },
    });
    new Gauge({
      name: 'llmlb_shared_view_failed_rounds',
      help: 'Shared-view rounds that could not reach Redis since start',
      registers: [registry],
      collect() {
        this.set(view.failures);
      },
    });
    new Gauge({
      name: 'llmlb_shared_view_handovers',
      help: "Slots another router's round handed straight to this one (it was waiting for them), since start",
      registers: [registry],
      collect() {
        this.set(view.grantsTaken);
      },
    });
  }
  if (state) {
    const gauge = (name: string, help: string, value: () => number): void => {
      new Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          this.set(value());
        },
      });
    };
    gauge(
      'llmlb_shared_state_up',
      '1 while this router publishes its pushes and answers (sharedState)',
      () => (state.up ? 1 : 0),
    );
    gauge(
      'llmlb_shared_state_routers',
      'Other routers heard from within sharedState.ttlMs',
      () => state.liveRouters,
    );
    gauge(
      'llmlb_shared_state_published_bytes',
      'Bytes of shared-state batches published since start',
      () => state.stats.publishedBytes,
    );
    gauge(
      'llmlb_shared_state_received_bytes',
      "Bytes of other routers' shared-state batches received since start",
      () => state.stats.receivedBytes,
    );
    gauge(
      'llmlb_shared_state_publish_failures',
      'Shared-state batches that could not be published since start',
      () => state.stats.publishFailures,
    );
    gauge(
      'llmlb_shared_state_malformed',
      'Shared-state messages ignored as malformed since start',
      () => state.stats.malformed,
    );
    gauge(
      'llmlb_shared_state_dropped_events',
      'Pushes and answers dropped unsent (pending buffer full) since start',
      () => state.stats.dropped,
    );
    gauge(
      'llmlb_shared_state_received_batches',
      "Other routers' shared-state batches applied here since start",
      () => state.stats.received,
    );
    gauge(
      'llmlb_shared_state_lag_ms_sum',
      'From a batch leaving its router to its applying here (wall clock, ms), summed over batches',
      () => state.stats.lagMsSum,
    );
    gauge('llmlb_shared_state_lag_ms_max', 'The longest such lag (ms)', () => state.stats.lagMsMax);
    gauge(
      'llmlb_shared_state_allowance_waits',
      'Requests that waited for allowance on the backend their policy chose, since start',
      () => allowanceWaits.count,
    );
    gauge(
      'llmlb_shared_state_allowance_wait_ms',
      'Time those requests waited for allowance, summed (ms)',
      () => allowanceWaits.totalMs,
    );
    gauge(
      'llmlb_shared_state_expired_routers',
      'Routers presumed gone (silent for ttlMs) since start',
      () => state.stats.expired,
    );
    gauge(
      'llmlb_shared_state_departed_routers',
      'Routers dropped at once when known gone (serve --workers N: a worker exited) since start',
      () => state.stats.departed,
    );
    gauge(
      'llmlb_shared_state_remote_pushes',
      "Other routers' pushes applied to this router's policy since start",
      () => state.stats.remoteDispatched,
    );
    gauge(
      'llmlb_shared_state_remote_in_flight',
      "Other routers' requests in flight, all backends, as heard here",
      () => state.othersInFlight,
    );
  }
}
