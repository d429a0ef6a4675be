import { Counter, Gauge, type Registry } from 'prom-client';
import type { QuotaSnapshot } from '../core/quota/index.js';
import type { QuotaStore } from '../state/quota-store.js';

export interface QuotaMetrics {
  /** /schedule and proxy-gate outcomes. */
  decisions: Counter<'outcome'>;
  reclaimed: Counter;
  /** Proxied requests waiting in the quota gate (they are not in the scheduler's queue yet). */
  gateWaiting: Gauge<'model'>;
  /** Proxied requests let through ungated because the store was down (`state.failOpen`). */
  failOpen: Counter<'model'>;
  /** Store outages, rebuilds of lost state, leases put back after a loss. */
  outages: Counter;
  reseeds: Counter;
  reregistered: Counter;
}

const PER_MODEL: [string, string, (m: QuotaSnapshot) => number][] = [
  ['llmlb_quota_in_flight', 'Admitted leases not yet completed', (m) => m.inFlight],
  ['llmlb_quota_max_concurrent', 'Concurrency cap', (m) => m.limits.maxConcurrent],
  ['llmlb_quota_window_tokens', 'Estimated tokens admitted in the rolling minute', (m) => m.windowTokens],
  ['llmlb_quota_tokens_per_minute', 'Tokens-per-minute target', (m) => m.limits.tokensPerMinute],
  ['llmlb_quota_window_requests', 'Requests admitted in the rolling minute', (m) => m.windowRequests],
  ['llmlb_quota_requests_per_minute', 'Requests-per-minute target', (m) => m.limits.requestsPerMinute],
  ['llmlb_quota_deficit_tokens', 'WDRR deficit', (m) => m.deficit],
];

/**
 * Quota gauges, read from the store when /metrics is scraped (so requests never touch them);
 * with Redis they show the shared state, the same on every replica. prom-client collects all
 * metrics of a scrape concurrently: they share one store read.
 */
export function registerQuotaMetrics(registry: Registry, store: () => QuotaStore | undefined): QuotaMetrics {
  const registers = [registry];
  let reading: Promise<QuotaSnapshot[]> | undefined;
  // A store that is down yields no per-model series (llmlb_quota_store_up says why), never a
  // failed scrape.
  const read = (s: QuotaStore): Promise<QuotaSnapshot[]> =>
    (reading ??= s
      .snapshot()
      .catch(() => [])
      .finally(() => setImmediate(() => (reading = undefined))));
  for (const [name, help, pick] of PER_MODEL) {
    new Gauge({
      name,
      help,
      labelNames: ['model'],
      registers,
      async collect() {
        const s = store();
        if (!s) return;
        const snap = await read(s);
        this.reset();
        for (const m of snap) this.set({ model: m.model }, pick(m));
      },
    });
  }
  new Gauge({
    name: 'llmlb_admission_backpressure_score',
    help: 'Backpressure score of GET /advice (0 = none, 1 = hot congestion)',
    registers,
    async collect() {
      const s = store();
      if (!s) return;
      try {
        this.set((await s.advice()).backpressure_score);
      } catch {
        this.reset(); // store down: no value rather than a stale one
      }
    },
  });
  new Gauge({
    name: 'llmlb_quota_store_up',
    help: 'Whether the quota store answers (0 while Redis is unreachable: quota-gated requests get 503 unless state.failOpen)',
    registers,
    collect() {
      this.set(store()?.health?.().up === false ? 0 : 1);
    },
  });
  return {
    gateWaiting: new Gauge({
      name: 'llmlb_quota_gate_waiting',
      help: 'Proxied requests waiting in the router for their model to come under its quota',
      labelNames: ['model'],
      registers,
    }),
    decisions: new Counter({
      name: 'llmlb_admission_decisions_total',
      help: 'Admission decisions (schedule and proxy gate) by outcome',
      labelNames: ['outcome'],
      registers,
    }),
    reclaimed: new Counter({
      name: 'llmlb_admission_reclaimed_total',
      help: 'Leases reclaimed after their TTL',
      registers,
    }),
    failOpen: new Counter({
      name: 'llmlb_quota_gate_fail_open_total',
      help: 'Proxied requests passed without a quota lease because the quota store was down (state.failOpen)',
      labelNames: ['model'],
      registers,
    }),
    outages: new Counter({
      name: 'llmlb_quota_store_outages_total',
      help: 'Times the quota store became unreachable',
      registers,
    }),
    reseeds: new Counter({
      name: 'llmlb_quota_store_reseeds_total',
      help: 'Times the shared quota state was found lost or rolled back and rebuilt from configuration',
      registers,
    }),
    reregistered: new Counter({
      name: 'llmlb_quota_leases_reregistered_total',
      help: 'Leases this replica put back after the shared state lost them',
      registers,
    }),
  };
}
