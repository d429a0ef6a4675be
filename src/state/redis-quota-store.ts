import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import {
  AdviceWindow,
  LeaseNotFoundError,
  applyLimits,
  capacityOf,
  patchLimits,
  reclaimLease,
  releaseLease,
  resolveOptions,
  snapshotState,
  tryAdmit,
  type Advice,
  type AdmitRequest,
  type AdmitResult,
  type Lease,
  type QuotaLimits,
  type QuotaOptions,
  type QuotaSnapshot,
  type QuotaState,
  type WindowSlot,
} from '../core/quota/index.js';
import type { QuotaStore, StoreEnv } from './quota-store.js';
import { loadScripts, type QuotaScripts } from './redis/scripts.js';

export interface RedisQuotaStoreOptions {
  /** Key prefix; replicas sharing quotas use the same one. */
  prefix?: string;
  quota?: Partial<QuotaOptions>;
  env?: Partial<StoreEnv>;
  /** Most /schedule calls decided in one read–commit round (group commit). */
  maxBatch?: number;
}

interface Pending {
  req: AdmitRequest;
  resolve: (r: AdmitResult) => void;
  reject: (e: unknown) => void;
}

/** Give up after this many lost races in a row: something is badly wrong (or a replica spins). */
const MAX_ATTEMPTS = 1000;

/**
 * Quotas and leases in Redis, shared by router replicas.
 *
 * The state of all models is one JSON document with a version; every change is decided by the
 * same pure core as the memory store (so the two can't drift apart) on a fresh read, and
 * committed by commit.lua only if the version hasn't moved — together with the lease writes.
 * A replica that lost the race re-reads and decides again, so nothing is ever admitted on a
 * stale view. Within a replica, calls run one round at a time and concurrent /schedule calls are
 * decided together in one round (group commit), which keeps the race rare and Redis round trips
 * at two per batch instead of two per call.
 */
export class RedisQuotaStore implements QuotaStore {
  readonly #redis: Redis;
  readonly #scripts: QuotaScripts;
  readonly #keys: { state: string; leases: string; exp: string };
  readonly #o: QuotaOptions;
  readonly #env: StoreEnv;
  readonly #advice = new AdviceWindow();
  readonly #maxBatch: number;
  #chain: Promise<unknown> = Promise.resolve();
  #pending: Pending[] = [];
  #drainQueued = false;
  /** Commits that lost a race (a test and the bench report it). */
  conflicts = 0;

  constructor(redis: Redis, opts: RedisQuotaStoreOptions = {}) {
    this.#redis = redis;
    this.#scripts = loadScripts(redis);
    const p = opts.prefix ?? 'llmlb:{quota}:';
    this.#keys = { state: `${p}state`, leases: `${p}leases`, exp: `${p}exp` };
    this.#o = resolveOptions(opts.quota);
    this.#env = { now: Date.now, random: Math.random, newId: () => `tsk_${randomUUID()}`, ...opts.env };
    this.#maxBatch = opts.maxBatch ?? 256;
  }

  /** Connect (rejects when Redis is unreachable, rather than queueing forever) and apply limits. */
  static async connect(
    url: string,
    limits: Record<string, QuotaLimits>,
    opts: RedisQuotaStoreOptions = {},
  ): Promise<RedisQuotaStore> {
    const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 3 });
    // Connection errors surface as failed commands (and so as failed requests); without a
    // listener ioredis would also print each one as an unhandled 'error' event.
    redis.on('error', () => undefined);
    try {
      await redis.connect();
    } catch (err) {
      redis.disconnect();
      throw new Error(`cannot reach Redis at ${url}: ${(err as Error).message}`);
    }
    const store = new RedisQuotaStore(redis, opts);
    await store.configure(limits);
    return store;
  }

  get keys(): Readonly<{ state: string; leases: string; exp: string }> {
    return this.#keys;
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(fn, fn);
    this.#chain = run.catch(() => undefined);
    return run;
  }

  async #load(): Promise<{ v: number; state: QuotaState }> {
    const [v, json] = await this.#redis.hmget(this.#keys.state, 'v', 'json');
    return { v: Number(v ?? 0), state: json ? decodeState(json) : { models: {} } };
  }

  #commit(v: number, state: QuotaState, mode: string, args: (string | number)[] = []): Promise<number> {
    const k = this.#keys;
    return this.#scripts.commit([k.state, k.leases, k.exp], [v, encodeState(state), mode, ...args]);
  }

  /**
   * Read, decide with `decide` (mutates the state it is given, or throws with nothing written),
   * commit; on a lost race decide again on a fresh read. Mode 'none': nothing to write.
   */
  async #transact<T>(
    decide: (state: QuotaState) => { result: T; mode: string; args?: (string | number)[] },
  ): Promise<T> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { v, state } = await this.#load();
      const d = decide(state);
      if (d.mode === 'none') return d.result;
      const r = await this.#commit(v, state, d.mode, d.args);
      if (r === 1) return d.result;
      this.conflicts++;
      // Spread out replicas that keep colliding.
      if (attempt > 2) await new Promise((res) => setTimeout(res, Math.random() * Math.min(20, attempt)));
    }
    throw new Error('quota store: too many lost races committing to Redis');
  }

  acquire(req: AdmitRequest): Promise<AdmitResult> {
    return new Promise<AdmitResult>((resolve, reject) => {
      this.#pending.push({ req, resolve, reject });
      if (!this.#drainQueued) {
        this.#drainQueued = true;
        void this.#serial(() => this.#drain());
      }
    });
  }

  async #drain(): Promise<void> {
    this.#drainQueued = false;
    const batch = this.#pending.splice(0, this.#maxBatch);
    if (this.#pending.length > 0) {
      this.#drainQueued = true;
      void this.#serial(() => this.#drain());
    }
    try {
      const outcomes = await this.#transact((state) => {
        const before = JSON.stringify(state);
        const now = this.#env.now();
        const out: ({ ok: AdmitResult } | { err: unknown })[] = [];
        const puts: (string | number)[] = [];
        for (const p of batch) {
          try {
            const r = tryAdmit(state, p.req, this.#env.newId(), now, this.#o, this.#env.random);
            if (r.kind === 'admitted') puts.push(r.lease.id, JSON.stringify(r.lease), r.lease.expiresAt);
            out.push({ ok: r });
          } catch (err) {
            out.push({ err });
          }
        }
        // Refusals change nothing worth a commit unless an age-bonus hold opened or grew.
        if (puts.length === 0 && !holdsChanged(before, state)) return { result: out, mode: 'none' };
        return { result: out, mode: 'put', args: puts };
      });
      const now = this.#env.now();
      outcomes.forEach((o, i) => {
        if ('ok' in o) {
          this.#advice.record(now, o.ok.kind === 'admitted' ? null : o.ok.waitForMs);
          batch[i]!.resolve(o.ok);
        } else batch[i]!.reject(o.err);
      });
    } catch (err) {
      for (const p of batch) p.reject(err);
    }
  }

  complete(leaseId: string): Promise<Lease> {
    return this.#serial(async () => {
      for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        const json = await this.#redis.hget(this.#keys.leases, leaseId);
        if (!json) throw new LeaseNotFoundError(leaseId);
        const lease = JSON.parse(json) as Lease;
        const { v, state } = await this.#load();
        releaseLease(state, lease, this.#env.now());
        const r = await this.#commit(v, state, 'take', [leaseId]);
        if (r === 1) return lease;
        this.conflicts++; // version moved, or someone else completed/reclaimed it: look again
      }
      throw new Error('quota store: too many lost races committing to Redis');
    });
  }

  async heartbeat(leaseId: string): Promise<Lease> {
    const expiresAt = this.#env.now() + this.#o.leaseTtlMs;
    const r = await this.#scripts.heartbeat([this.#keys.leases, this.#keys.exp], leaseId, expiresAt);
    if (!r) throw new LeaseNotFoundError(leaseId);
    return { ...(JSON.parse(r[0]) as Lease), expiresAt: Number(r[1]) };
  }

  reclaimExpired(): Promise<Lease[]> {
    return this.#serial(async () => {
      for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        const now = this.#env.now();
        const ids = await this.#redis.zrangebyscore(this.#keys.exp, '-inf', now, 'LIMIT', 0, 500);
        if (ids.length === 0) return [];
        const jsons = await this.#redis.hmget(this.#keys.leases, ...ids);
        const leases = jsons.filter((j): j is string => j !== null).map((j) => JSON.parse(j) as Lease);
        const { v, state } = await this.#load();
        for (const l of leases) reclaimLease(state, l, this.#o);
        const r = await this.#commit(v, state, 'reclaim', [now, ...leases.map((l) => l.id)]);
        if (r === 1) return leases;
        this.conflicts++;
      }
      throw new Error('quota store: too many lost races committing to Redis');
    });
  }

  async configure(limits: Record<string, QuotaLimits>): Promise<void> {
    await this.#serial(() =>
      this.#transact((state) => {
        applyLimits(state, limits);
        return { result: true, mode: 'state' };
      }),
    );
  }

  async setLimits(model: string, patch: Partial<QuotaLimits>): Promise<QuotaLimits> {
    return this.#serial(() =>
      this.#transact((state) => ({ result: { ...patchLimits(state, model, patch) }, mode: 'state' })),
    );
  }

  async snapshot(): Promise<QuotaSnapshot[]> {
    const { state } = await this.#load();
    return snapshotState(state, this.#env.now(), this.#o.tickMs);
  }

  /** Pressure seen by this replica's callers, capacity and in-flight shared by all replicas. */
  async advice(): Promise<Advice> {
    const { state } = await this.#load();
    const c = capacityOf(state);
    return this.#advice.compute(this.#env.now(), c.inFlight, c.capacity);
  }

  async close(): Promise<void> {
    await this.#chain;
    await this.#redis.quit();
  }
}

/**
 * The state document is read and written whole on every decision, and a busy model keeps up to
 * 60 s / tickMs window slots: store them as flat number arrays, about a third of the size of
 * {start, tokens, requests} objects.
 */
export function encodeState(state: QuotaState): string {
  return JSON.stringify(state, (key, value: unknown) =>
    key === 'slots' ? (value as WindowSlot[]).flatMap((x) => [x.start, x.tokens, x.requests]) : value,
  );
}

export function decodeState(json: string): QuotaState {
  const state = JSON.parse(json) as QuotaState;
  for (const m of Object.values(state.models)) {
    const flat = m.slots as unknown as number[];
    const slots: WindowSlot[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3)
      slots.push({ start: flat[i]!, tokens: flat[i + 1]!, requests: flat[i + 2]! });
    m.slots = slots;
  }
  return state;
}

function holdsChanged(before: string, state: QuotaState): boolean {
  const b = JSON.parse(before) as QuotaState;
  for (const [k, m] of Object.entries(state.models)) {
    if (JSON.stringify(b.models[k]?.hold ?? null) !== JSON.stringify(m.hold)) return true;
  }
  return false;
}
