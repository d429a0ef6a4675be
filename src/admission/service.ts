import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { RouterConfig } from '../config/schema.js';
import type { QuotaLimits, QuotaOptions } from '../core/quota/index.js';
import { MemoryQuotaStore } from '../state/memory-quota-store.js';
import type { QuotaStore } from '../state/quota-store.js';
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
        })
      : new MemoryQuotaStore(limitsOf(s), optionsOf(s));
    const every = s.admission?.reclaimIntervalMs ?? 1000;
    this.#timer = setInterval(() => void this.reclaim(), every).unref();
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
      this.log.error({ err }, 'lease reclaim failed');
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
    if (JSON.stringify(limitsOf(prev)) === JSON.stringify(limitsOf(next))) return [];
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
