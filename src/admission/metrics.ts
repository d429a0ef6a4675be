import { Counter, Gauge, type Registry } from 'prom-client';
import type { QuotaSnapshot } from '../core/quota/index.js';
import type { QuotaStore } from '../state/quota-store.js';

export interface QuotaMetrics {
  /** /schedule and proxy-gate outcomes. */
  decisions: Counter<'outcome'>;
  reclaimed: Counter;
  /** Proxied requests waiting in the quota gate (they are not in the scheduler's queue yet). */
  gateWaiting: Gauge<'model'>;
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
  const read = (s: QuotaStore): Promise<QuotaSnapshot[]> =>
    (reading ??= s.snapshot().finally(() => setImmediate(() => (reading = undefined))));
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
      if (s) this.set((await s.advice()).backpressure_score);
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
  };
}
