import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { RouterConfig } from '../config/schema.js';
import type { QuotaLimits, QuotaOptions } from '../core/quota/index.js';
import { MemoryQuotaStore } from '../state/memory-quota-store.js';
import { StoreUnavailableError, type QuotaStore, type StoreEvent } from '../state/quota-store.js';
import { RedisQuotaStore } from '../state/redis-quota-store.js';
import { registerQuotaMetrics, type QuotaMetrics } from './metrics.js';

type Settings = Pick<RouterConfig, 'state' | 'quotas' | 'admission'>;

function limitsOf(s: Settings): Record<string, QuotaLimits> {
  return { ...(s.quotas?.models ?? {}) };
}

function optionsOf(s: Settings): Partial<QuotaOptions> {
  return s.admission ? { leaseTtlMs: s.admission.leaseTtlMs, tickMs: s.admission.tickMs } : {};
}

/**
 * The router's admission side: owns the QuotaStore (memory, or Redis when `state.redis` is set),
 * runs the lease reclaimer, follows config reloads, exports quota gauges. Used by the admission
 * API (http.ts) and the proxy gate (proxy-gate.ts).
 */
export class Admission {
  #store: QuotaStore | undefined;
  #timer: NodeJS.Timeout | undefined;
  #settings: Settings;
  #models: Set<string>;
  #reclaiming = false;
  /** The store outage already logged by the gate (log once per outage, count every request). */
  #outageLogged = -1;
  readonly metrics: QuotaMetrics;

  constructor(
    settings: Settings,
    private readonly log: Logger,
    registry: Registry,
  ) {
    this.#settings = settings;
    this.#models = new Set(Object.keys(limitsOf(settings)));
    this.metrics = registerQuotaMetrics(registry, () => this.#store);
  }

  /** The store; only after start(). */
  get store(): QuotaStore {
    if (!this.#store) throw new Error('admission not started');
    return this.#store;
  }

  get leaseTtlMs(): number {
    return this.#settings.admission?.leaseTtlMs ?? 30_000;
  }

  /** Proxied requests pass ungated while the store is down (`state.failOpen`); default closed. */
  get failOpen(): boolean {
    return this.#settings.state?.failOpen === true;
  }

  /**
   * The proxy gate couldn't reach the store for `model`: count it when it failed open, and log
   * the first such request of each outage (not every one: an outage can cover thousands).
   */
  noteGateOutage(model: string, err: unknown, failedOpen: boolean): void {
    if (failedOpen) this.metrics.failOpen.inc({ model });
    const outage = this.#store?.health?.().outages ?? 0;
    if (outage === this.#outageLogged) return;
    this.#outageLogged = outage;
    const msg = failedOpen
      ? 'quota store unavailable: proxied requests pass without a quota until it is back (state.failOpen)'
      : 'quota store unavailable: quota-gated requests get 503 until it is back';
    this.log.error({ err, model }, msg);
  }

  /** Cheap check for the proxy path: is this model under a quota? */
  hasQuota(model: string): boolean {
    return this.#models.has(model);
  }

  async start(): Promise<void> {
    const s = this.#settings;
    this.#store = s.state
      ? await RedisQuotaStore.connect(s.state.redis, limitsOf(s), {
          prefix: s.state.keyPrefix,
          quota: optionsOf(s),
          commandTimeoutMs: s.state.commandTimeoutMs ?? 500,
          // Other replicas notice a rebuilt state on their reclaimer pass: wait for two of them.
          recoveryGraceMs: 2 * (s.admission?.reclaimIntervalMs ?? 1000),
          onEvent: (e) => this.#onStoreEvent(e),
        })
      : new MemoryQuotaStore(limitsOf(s), optionsOf(s));
    const every = s.admission?.reclaimIntervalMs ?? 1000;
    this.#timer = setInterval(() => {
      this.reclaim().catch((err: unknown) => this.log.error({ err }, 'lease reclaim failed'));
    }, every).unref();
  }

  #onStoreEvent(e: StoreEvent): void {
    switch (e.kind) {
      case 'down':
        this.metrics.outages.inc();
        this.log.error({ error: e.error }, 'quota store (Redis) unreachable: quota-gated requests fail fast');
        break;
      case 'up':
        this.log.info('quota store (Redis) answers again');
        break;
      case 'reseeded':
        this.metrics.reseeds.inc();
        this.log.warn(
          { reason: e.reason, models: e.models, leases: e.leases },
          'quota state was lost in Redis: configured limits re-seeded and leases put back',
        );
        break;
      case 'reregistered':
        this.metrics.reregistered.inc(e.leases);
        this.log.warn({ leases: e.leases }, 'quota state was rebuilt by another replica: leases put back');
        break;
    }
  }

  /** One reclaimer pass (also called by tests); never two at once. */
  async reclaim(): Promise<number> {
    if (this.#reclaiming || !this.#store) return 0;
    this.#reclaiming = true;
    try {
      const gone = await this.#store.reclaimExpired();
      if (gone.length > 0) {
        this.metrics.reclaimed.inc(gone.length);
        this.log.warn(
          { leases: gone.map((l) => ({ id: l.id, model: l.model })) },
          'reclaimed expired leases',
        );
      }
      return gone.length;
    } catch (err) {
      // An outage is logged once by the store's 'down' event, not every pass.
      if (!(err instanceof StoreUnavailableError)) this.log.error({ err }, 'lease reclaim failed');
      return 0;
    } finally {
      this.#reclaiming = false;
    }
  }

  /** Follow a reloaded config: quota limits change in place; the store kind needs a restart. */
  async reconfigure(next: Settings): Promise<string[]> {
    const prev = this.#settings;
    if (JSON.stringify(prev.state) !== JSON.stringify(next.state)) {
      this.log.warn('state.redis changes take effect after a restart');
    }
    if (JSON.stringify(prev.admission) !== JSON.stringify(next.admission)) {
      this.log.warn('admission settings take effect after a restart');
    }
    if (JSON.stringify(limitsOf(prev)) === JSON.stringify(limitsOf(next))) {
      // Same limits: still make sure the shared state has them (Redis may have lost it). An
      // outage doesn't fail the reload; the store restores everything when Redis is back.
      await this.#store
        ?.verify?.()
        .catch((err: unknown) => this.log.warn({ err }, 'quota store check failed'));
      return [];
    }
    await this.#store?.configure(limitsOf(next));
    this.#settings = { ...prev, quotas: next.quotas };
    this.#models = new Set(Object.keys(limitsOf(next)));
    return ['quotas'];
  }

  /** After an admin PATCH: keep the reload baseline in step so a reload of the same file re-applies it. */
  noteLimits(model: string, limits: QuotaLimits): void {
    const models = { ...limitsOf(this.#settings), [model]: limits };
    this.#settings = { ...this.#settings, quotas: { models } };
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    await this.#store?.close();
  }
}
