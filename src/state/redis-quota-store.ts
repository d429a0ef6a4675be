/**
 * Quotas and leases in Redis, shared by router replicas (the class comment below says how).
 *
 * Why one file of ~700 lines: the store is one state machine over one shared document. Every
 * decision (admit, complete, heartbeat, reclaim, configure) reads the state through `#load`, which
 * checks it against the epoch and version this replica last saw and rebuilds it from this
 * replica's memory (its leases, its admissions of the minute, its limits) before anything is
 * decided — so the decisions, the recovery and that memory share the same private fields, and
 * splitting them would only turn those fields into a wide internal interface. What does not share
 * them is beside it in src/state/redis/: the connection's up/down state and timeouts (`link.ts`),
 * the state document's encoding (`state-codec.ts`) and the Lua scripts that commit (`scripts.ts`).
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import {
  AdviceWindow,
  LeaseNotFoundError,
  applyLimits,
  capacityOf,
  createModelQuota,
  createQuotaState,
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
  type ModelQuota,
  type QuotaLimits,
  type QuotaOptions,
  type QuotaSnapshot,
  type QuotaState,
  type WindowSlot,
} from '../core/quota/index.js';
import { backoffMs } from '../core/backoff.js';
import { pruneWindow, recordAdmission } from '../core/quota/window.js';
import {
  StoreUnavailableError,
  type QuotaStore,
  type StoreEnv,
  type StoreEvent,
  type StoreHealth,
} from './quota-store.js';
import { RedisLink } from './redis/link.js';
import { STALE_EPOCH, loadScripts, type QuotaScripts } from './redis/scripts.js';
import { decodeState, encodeState, holdsChanged } from './redis/state-codec.js';

export { decodeState, encodeState } from './redis/state-codec.js';

export interface RedisQuotaStoreOptions {
  /** Key prefix; replicas sharing quotas use the same one. */
  prefix?: string;
  quota?: Partial<QuotaOptions>;
  env?: Partial<StoreEnv>;
  /** Most /schedule calls decided in one read–commit round (group commit). */
  maxBatch?: number;
  /** A Redis call unanswered this long fails, and the store reports itself down (default 500). */
  commandTimeoutMs?: number;
  /** How often a store that is down asks Redis whether it answers again. */
  probeIntervalMs?: number;
  /**
   * After the state is rebuilt, admissions wait this long (ms) so that every replica can put its
   * leases back first (they notice within one reclaimer pass); default 2000.
   */
  recoveryGraceMs?: number;
  /** Outage and recovery events, for the host's log and counters. */
  onEvent?: (e: StoreEvent) => void;
}

interface Pending {
  req: AdmitRequest;
  resolve: (r: AdmitResult) => void;
  reject: (e: unknown) => void;
}

/** A read of the state hash, decoded, with what identifies it. */
interface Loaded {
  v: number;
  epoch: string;
  state: QuotaState;
  /** Admissions wait until then (ms): the state was just rebuilt (0: none). */
  until: number;
}

/** What is wrong with what Redis holds, seen from this replica (null: nothing). */
type Problem = 'lost' | 'unversioned' | 'rolled_back' | 'new_epoch';

/** Give up after this many lost races in a row: something is badly wrong (or a replica spins). */
const MAX_ATTEMPTS = 1000;

/** Limits of a model that only a re-registered lease names (it is retired: admits nothing). */
const RETIRED_LIMITS: QuotaLimits = { weight: 1, maxConcurrent: 0, tokensPerMinute: 0, requestsPerMinute: 0 };

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
 *
 * Redis may lose what it holds (restart without persistence, FLUSHALL, failover to an empty or
 * lagging replica). Every read checks for it at no extra cost — the state missing, its epoch
 * (a random id written when the state is seeded) changed, or its version gone backwards — and
 * the state is rebuilt before anything is decided on it: the configured limits (as last seen in
 * Redis, so admin changes survive), plus every lease this replica granted and hasn't seen
 * completed, plus its admissions of the last minute. Other replicas find the new epoch on their
 * next read or heartbeat and add theirs, so in-flight counts never drop below what is really
 * running; a lease completed elsewhere but re-registered counts until its TTL reclaims it.
 *
 * Outages fail fast: commands time out after `commandTimeoutMs`, nothing is queued while the
 * connection is down, and once a command failed the store refuses at once (StoreUnavailableError)
 * until a probe gets an answer again.
 */
export class RedisQuotaStore implements QuotaStore {
  readonly #redis: Redis;
  readonly #scripts: QuotaScripts;
  readonly #keys: { state: string; leases: string; exp: string };
  readonly #o: QuotaOptions;
  readonly #env: StoreEnv;
  readonly #advice = new AdviceWindow();
  readonly #maxBatch: number;
  readonly #graceMs: number;
  readonly #onEvent: (e: StoreEvent) => void;
  #chain: Promise<unknown> = Promise.resolve();
  #pending: Pending[] = [];
  #drainQueued = false;
  /** Configured limits (configure(), this replica's setLimits): what a re-seed restores. */
  #limits = new Map<string, QuotaLimits>();
  /** Models of the last state read: their limits include admin changes made on any replica. */
  #observed: QuotaState['models'] | undefined;
  /** Epoch and version of the state this replica last read (undefined: none read yet). */
  #epoch: string | undefined;
  #seenV = 0;
  /** Leases granted here and not seen completed: what this replica re-registers after a loss. */
  readonly #mine = new Map<string, Lease>();
  /** Leases whose completion failed during an outage: completed once Redis answers again. */
  readonly #finishing = new Set<string>();
  /** This replica's admissions in the rolling minute, per model: re-charged after a loss. */
  readonly #charged = new Map<string, WindowSlot[]>();
  #recovering: Promise<void> | undefined;
  readonly #link: RedisLink;
  #reseeds = 0;
  #reregistered = 0;
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
    this.#graceMs = opts.recoveryGraceMs ?? 2000;
    this.#onEvent = opts.onEvent ?? (() => undefined);
    this.#link = new RedisLink(redis, {
      timeoutMs: opts.commandTimeoutMs ?? 500,
      probeMs: opts.probeIntervalMs ?? 250,
      onEvent: this.#onEvent,
      onUp: () => this.#afterOutage(),
    });
  }

  /** Connect (rejects when Redis is unreachable, rather than queueing forever) and apply limits. */
  static async connect(
    url: string,
    limits: Record<string, QuotaLimits>,
    opts: RedisQuotaStoreOptions = {},
  ): Promise<RedisQuotaStore> {
    const timeout = opts.commandTimeoutMs ?? 500;
    const redis = new Redis(url, {
      lazyConnect: true,
      // Fail fast in an outage (503 + Retry-After at once) instead of queueing requests behind
      // reconnection attempts: no offline queue, no retries. Calls are bounded in time by the
      // store itself (RedisLink), not by ioredis' commandTimeout, which also fires when the reply
      // has arrived but a busy event loop hasn't read it yet.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      connectTimeout: Math.max(1000, timeout),
      retryStrategy: (times) => Math.min(50 * times, 1000),
    });
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
    try {
      await store.configure(limits);
    } catch (err) {
      await store.close();
      throw err;
    }
    return store;
  }

  get keys(): Readonly<{ state: string; leases: string; exp: string }> {
    return this.#keys;
  }

  health(): StoreHealth {
    return {
      up: this.#link.up,
      outages: this.#link.outages,
      reseeds: this.#reseeds,
      reregistered: this.#reregistered,
    };
  }

  /** Redis answers again: restore what it lost now, not on the next request; then finish what the outage cut off. */
  async #afterOutage(): Promise<void> {
    await this.verify();
    for (const id of [...this.#finishing]) {
      await this.complete(id).catch((err: unknown) => {
        if (err instanceof LeaseNotFoundError) this.#finishing.delete(id);
      });
    }
  }

  // --- the state and its recovery ------------------------------------------------------------

  #diagnose(v: number, present: boolean, epoch: string | null): Problem | null {
    if (!present) return 'lost';
    if (!epoch) return 'unversioned';
    if (epoch !== this.#epoch) return 'new_epoch';
    // Versions only grow within an epoch: a smaller one is a failover that lost writes.
    if (v < this.#seenV) return 'rolled_back';
    return null;
  }

  /** A state fit to decide on: lost, rolled back or re-seeded state is repaired first. */
  async #load(): Promise<Loaded> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const [vs, json, epoch, until] = await this.#link.io(() =>
        this.#redis.hmget(this.#keys.state, 'v', 'json', 'epoch', 'until'),
      );
      const v = Number(vs ?? 0);
      const problem = this.#diagnose(v, json !== null, epoch ?? null);
      if (problem === null) {
        this.#seenV = v;
        const state = decodeState(json!);
        this.#observed = state.models;
        return { v, epoch: epoch!, state, until: Number(until ?? 0) };
      }
      await this.#recover();
    }
    throw new Error('quota store: the shared state keeps changing under recovery');
  }

  /** One recovery at a time per replica; callers that found the same problem wait for it. */
  #recover(): Promise<void> {
    this.#recovering ??= this.#recoverOnce().finally(() => (this.#recovering = undefined));
    return this.#recovering;
  }

  /**
   * Read the state and the leases in one MULTI (a consistent view), and repair. Seeding rewrites
   * the whole state and lease table; adopting another replica's new epoch only adds this
   * replica's leases. Both commit version- and epoch-checked: a lost race just returns, and the
   * caller reads again.
   */
  async #recoverOnce(): Promise<void> {
    const k = this.#keys;
    const ids = [...this.#mine.keys()];
    const rows = await this.#link.io(async () => {
      const m = this.#redis.multi().hmget(k.state, 'v', 'json', 'epoch').hgetall(k.leases);
      if (ids.length > 0) m.hmget(k.leases, ...ids);
      const out = await m.exec();
      if (!out) throw new Error('MULTI aborted');
      for (const [err] of out) if (err) throw err;
      return out.map(([, r]) => r);
    });
    const [vs = null, json = null, epoch = null] = rows[0] as (string | null)[];
    const v = Number(vs ?? 0);
    const problem = this.#diagnose(v, json !== null, epoch);
    if (problem === null) return;
    const now = this.#env.now();
    if (problem === 'new_epoch')
      return this.#adopt(v, epoch!, json!, ids, (rows[2] ?? []) as (string | null)[], now);
    const old = json !== null ? decodeState(json) : undefined;
    const state = createQuotaState(this.#seedLimits());
    if (old) {
      // A rolled-back or unversioned state still knows the minute's window: keep it.
      for (const [name, m] of Object.entries(state.models)) {
        const o = Object.hasOwn(old.models, name) ? old.models[name] : undefined;
        if (o) Object.assign(m, { slots: o.slots, deficit: o.deficit, meanHoldMs: o.meanHoldMs });
      }
    } else this.#rechargeWindow(state, now);
    // In flight = every lease Redis still has plus every one of ours it doesn't.
    const leases = new Map<string, Lease>();
    for (const [id, j] of Object.entries(rows[1] as Record<string, string>))
      leases.set(id, JSON.parse(j) as Lease);
    let added = 0;
    for (const [id, l] of this.#mine) {
      if (leases.has(id)) continue;
      leases.set(id, l);
      added++;
    }
    const exp = now + this.#o.leaseTtlMs;
    const epochNew = randomUUID();
    // A fresh deployment has no other replica's leases to wait for.
    const until = this.#epoch === undefined && problem === 'lost' ? 0 : now + this.#graceMs;
    const args: (string | number)[] = [epochNew, until];
    for (const l of leases.values()) {
      this.#countLease(state, l);
      // A full TTL from now: the holder's heartbeats may have gone to a replica we can't see.
      args.push(l.id, JSON.stringify(l), Math.max(l.expiresAt, exp));
    }
    const r = await this.#link.io(() =>
      this.#scripts.commit([k.state, k.leases, k.exp], [v, epoch ?? '', encodeState(state), 'seed', ...args]),
    );
    if (r !== 1) {
      this.conflicts++;
      return;
    }
    const first = this.#epoch === undefined;
    this.#epoch = epochNew;
    this.#seenV = v + 1;
    this.#observed = state.models;
    this.#reregistered += added;
    // A replica's very first read finding nothing is a fresh deployment, not a loss.
    if (first && problem === 'lost') return;
    this.#reseeds++;
    this.#onEvent({
      kind: 'reseeded',
      reason: problem,
      models: Object.keys(state.models).length,
      leases: leases.size,
    });
  }

  /** Another replica (re)seeded the state: add the leases of ours it lacks, and our window. */
  async #adopt(
    v: number,
    epoch: string,
    json: string,
    ids: string[],
    present: (string | null)[],
    now: number,
  ): Promise<void> {
    const missing = ids.flatMap((id, i) => (present[i] === null ? [this.#mine.get(id)!] : []));
    // Our first read (a start, or an epoch we never saw) has nothing to add.
    if (missing.length === 0 && (this.#epoch === undefined || this.#charged.size === 0)) {
      this.#epoch = epoch;
      this.#seenV = v;
      return;
    }
    const state = decodeState(json);
    if (this.#epoch !== undefined) this.#rechargeWindow(state, now);
    const exp = now + this.#o.leaseTtlMs;
    const puts: (string | number)[] = [];
    for (const l of missing) {
      this.#countLease(state, l);
      puts.push(l.id, JSON.stringify(l), Math.max(l.expiresAt, exp));
    }
    const k = this.#keys;
    const r = await this.#link.io(() =>
      this.#scripts.commit([k.state, k.leases, k.exp], [v, epoch, encodeState(state), 'put', ...puts]),
    );
    if (r !== 1) {
      this.conflicts++;
      return;
    }
    this.#epoch = epoch;
    this.#seenV = v + 1;
    this.#observed = state.models;
    if (missing.length > 0) {
      this.#reregistered += missing.length;
      this.#onEvent({ kind: 'reregistered', leases: missing.length });
    }
  }

  /** Limits to rebuild from: this replica's configured models, at their last values seen in Redis. */
  #seedLimits(): Record<string, QuotaLimits> {
    const out: Record<string, QuotaLimits> = Object.create(null) as Record<string, QuotaLimits>;
    const seen = this.#observed;
    for (const [name, l] of this.#limits) {
      const m = seen && Object.hasOwn(seen, name) ? seen[name] : undefined;
      out[name] = m && !m.retired ? { ...m.limits } : l;
    }
    return out;
  }

  /** One more lease in flight; a model the configuration no longer has is kept as retired. */
  #countLease(state: QuotaState, l: Lease): void {
    let m: ModelQuota | undefined = Object.hasOwn(state.models, l.model) ? state.models[l.model] : undefined;
    if (!m) {
      m = { ...createModelQuota(this.#limits.get(l.model) ?? RETIRED_LIMITS), retired: true };
      state.models[l.model] = m;
    }
    m.inFlight++;
  }

  /** Put this replica's admissions of the last minute back into a window that lost them. */
  #rechargeWindow(state: QuotaState, now: number): void {
    for (const [model, mine] of this.#charged) {
      pruneWindow(mine, now, this.#o.tickMs);
      if (mine.length === 0) {
        this.#charged.delete(model);
        continue;
      }
      const m = Object.hasOwn(state.models, model) ? state.models[model] : undefined;
      if (!m) continue;
      for (const s of mine) {
        const at = m.slots.findIndex((x) => x.start >= s.start);
        if (at >= 0 && m.slots[at]!.start === s.start) {
          m.slots[at]!.tokens += s.tokens;
          m.slots[at]!.requests += s.requests;
        } else m.slots.splice(at < 0 ? m.slots.length : at, 0, { ...s });
      }
    }
  }

  /** Remember what we admitted (for re-registration and window re-charge after a loss). */
  #granted(lease: Lease, now: number): void {
    this.#mine.set(lease.id, lease);
    let slots = this.#charged.get(lease.model);
    if (!slots) this.#charged.set(lease.model, (slots = []));
    pruneWindow(slots, now, this.#o.tickMs);
    recordAdmission(slots, now, this.#o.tickMs, lease.tokens);
  }

  /** Check the shared state now (reload, reconnect) and restore what it lost. */
  async verify(): Promise<void> {
    await this.#load();
  }

  // --- decisions --------------------------------------------------------------------------------

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(fn, fn);
    this.#chain = run.catch(() => undefined);
    return run;
  }

  #commit(at: Loaded, mode: string, args: (string | number)[] = []): Promise<number> {
    const k = this.#keys;
    return this.#link.io(() =>
      this.#scripts.commit(
        [k.state, k.leases, k.exp],
        [at.v, at.epoch, encodeState(at.state), mode, ...args],
      ),
    );
  }

  /**
   * Read, decide with `decide` (mutates the state it is given, or throws with nothing written),
   * commit; on a lost race decide again on a fresh read. Mode 'none': nothing to write.
   * `committed` runs right after a successful commit, before any other Redis reply is handled.
   */
  async #transact<T>(
    decide: (at: Loaded) => {
      result: T;
      mode: string;
      args?: (string | number)[];
      committed?: () => void;
    },
  ): Promise<T> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const at = await this.#load();
      const d = decide(at);
      if (d.mode === 'none') return d.result;
      const r = await this.#commit(at, d.mode, d.args);
      if (r === 1) {
        d.committed?.();
        return d.result;
      }
      this.conflicts++;
      // Spread out replicas that keep colliding.
      if (attempt > 2)
        await new Promise((res) => setTimeout(res, backoffMs(attempt - 2, 1, 20, this.#env.random())));
    }
    throw new Error('quota store: too many lost races committing to Redis');
  }

  acquire(req: AdmitRequest): Promise<AdmitResult> {
    // Down: refuse now rather than queue behind a round that will fail anyway.
    try {
      this.#link.assertUp();
    } catch (err) {
      return Promise.reject(err as Error);
    }
    return new Promise<AdmitResult>((resolve, reject) => {
      this.#pending.push({ req, resolve, reject });
      if (!this.#drainQueued) {
        this.#drainQueued = true;
        this.#serial(() => this.#drain()).catch((err: unknown) => this.#failPending(err));
      }
    });
  }

  /** A drain round that threw past its own handling: fail who waits rather than leave them hanging. */
  #failPending(err: unknown): void {
    this.#drainQueued = false;
    for (const p of this.#pending.splice(0)) p.reject(err);
  }

  async #drain(): Promise<void> {
    this.#drainQueued = false;
    const batch = this.#pending.splice(0, this.#maxBatch);
    if (this.#pending.length > 0) {
      this.#drainQueued = true;
      this.#serial(() => this.#drain()).catch((err: unknown) => this.#failPending(err));
    }
    try {
      const outcomes = await this.#transact((at) => {
        const now = this.#env.now();
        if (now < at.until) return { result: this.#recoveryWaits(at, batch, now), mode: 'none' };
        const state = at.state;
        const before = JSON.stringify(state);
        const out: ({ ok: AdmitResult } | { err: unknown })[] = [];
        const puts: (string | number)[] = [];
        const leases: Lease[] = [];
        for (const p of batch) {
          try {
            const r = tryAdmit(state, p.req, this.#env.newId(), now, this.#o, this.#env.random);
            if (r.kind === 'admitted') {
              puts.push(r.lease.id, JSON.stringify(r.lease), r.lease.expiresAt);
              leases.push(r.lease);
            }
            out.push({ ok: r });
          } catch (err) {
            out.push({ err });
          }
        }
        // Refusals change nothing worth a commit unless an age-bonus hold opened or grew.
        if (puts.length === 0 && !holdsChanged(before, state)) return { result: out, mode: 'none' };
        return {
          result: out,
          mode: 'put',
          args: puts,
          committed: () => leases.forEach((l) => this.#granted(l, now)),
        };
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

  /**
   * Just after a rebuild other replicas may not have put their leases back yet: every request
   * waits out the grace period (bad input and unknown models still fail as usual, decided on a
   * scratch copy that is thrown away).
   */
  #recoveryWaits(at: Loaded, batch: Pending[], now: number): ({ ok: AdmitResult } | { err: unknown })[] {
    const scratch = structuredClone(at.state);
    const wait = Math.max(this.#o.minWaitMs, at.until - now);
    return batch.map((p) => {
      try {
        const r = tryAdmit(scratch, p.req, 'scratch', now, this.#o, this.#env.random);
        const model = r.kind === 'admitted' ? r.lease.model : r.model;
        return {
          ok: { kind: 'wait', waitForMs: wait, rawWaitMs: at.until - now, model, reason: 'concurrency' },
        };
      } catch (err) {
        return { err };
      }
    });
  }

  complete(leaseId: string): Promise<Lease> {
    return this.#serial(async () => {
      try {
        for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
          // State first: if Redis lost it, recovery puts our leases back before we look this one up.
          const at = await this.#load();
          const json = await this.#link.io(() => this.#redis.hget(this.#keys.leases, leaseId));
          if (!json) throw new LeaseNotFoundError(leaseId);
          const lease = JSON.parse(json) as Lease;
          releaseLease(at.state, lease, this.#env.now());
          const r = await this.#commit(at, 'take', [leaseId]);
          if (r === 1) {
            this.#forget(leaseId);
            return lease;
          }
          this.conflicts++; // version moved, or someone else completed/reclaimed it: look again
        }
        throw new Error('quota store: too many lost races committing to Redis');
      } catch (err) {
        if (err instanceof LeaseNotFoundError) this.#forget(leaseId);
        // Its work is over: never re-register it, and release it once Redis is back.
        else if (err instanceof StoreUnavailableError && this.#mine.delete(leaseId))
          this.#finishing.add(leaseId);
        throw err;
      }
    });
  }

  #forget(id: string): void {
    this.#mine.delete(id);
    this.#finishing.delete(id);
  }

  async heartbeat(leaseId: string): Promise<Lease> {
    const k = this.#keys;
    for (let attempt = 0; attempt < 3; attempt++) {
      const expiresAt = this.#env.now() + this.#o.leaseTtlMs;
      const r = await this.#link.io(() =>
        this.#scripts.heartbeat([k.leases, k.exp, k.state], leaseId, expiresAt, this.#epoch ?? ''),
      );
      if (r === STALE_EPOCH) {
        // The state isn't the one we know: restore (our leases included), then look again.
        await this.#load();
        continue;
      }
      if (!r) {
        this.#forget(leaseId);
        throw new LeaseNotFoundError(leaseId);
      }
      const lease = { ...(JSON.parse(r[0]) as Lease), expiresAt: Number(r[1]) };
      const mine = this.#mine.get(leaseId);
      if (mine) mine.expiresAt = lease.expiresAt;
      return lease;
    }
    throw new Error('quota store: the shared state keeps changing under heartbeat');
  }

  reclaimExpired(): Promise<Lease[]> {
    return this.#serial(async () => {
      await this.#housekeep();
      for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        const now = this.#env.now();
        const ids = await this.#link.io(() =>
          this.#redis.zrangebyscore(this.#keys.exp, '-inf', now, 'LIMIT', 0, 500),
        );
        if (ids.length === 0) return [];
        const jsons = await this.#link.io(() => this.#redis.hmget(this.#keys.leases, ...ids));
        const leases = jsons.filter((j): j is string => j !== null).map((j) => JSON.parse(j) as Lease);
        const at = await this.#load();
        for (const l of leases) reclaimLease(at.state, l, this.#o);
        const r = await this.#commit(at, 'reclaim', [now, ...leases.map((l) => l.id)]);
        if (r === 1) {
          for (const l of leases) this.#forget(l.id);
          return leases;
        }
        this.conflicts++;
      }
      throw new Error('quota store: too many lost races committing to Redis');
    });
  }

  /**
   * The reclaimer's periodic check, without reading the state document: restore the state if it
   * is gone, and forget leases of ours that other replicas completed or reclaimed (the lease
   * table of the epoch we know no longer has them), so a later loss doesn't resurrect them.
   */
  async #housekeep(): Promise<void> {
    const k = this.#keys;
    const ids = [...this.#mine.keys()];
    const rows = await this.#link.io(async () => {
      const m = this.#redis.multi().hmget(k.state, 'v', 'epoch');
      if (ids.length > 0) m.hmget(k.leases, ...ids);
      const out = await m.exec();
      if (!out) throw new Error('MULTI aborted');
      for (const [err] of out) if (err) throw err;
      return out.map(([, r]) => r);
    });
    const [vs, epoch] = rows[0] as (string | null)[];
    if (this.#diagnose(Number(vs ?? 0), vs !== null, epoch ?? null) !== null) {
      await this.#load();
      return;
    }
    const present = (rows[1] ?? []) as (string | null)[];
    ids.forEach((id, i) => {
      if (present[i] === null) this.#mine.delete(id);
    });
  }

  async configure(limits: Record<string, QuotaLimits>): Promise<void> {
    await this.#serial(() =>
      this.#transact(({ state }) => {
        applyLimits(state, limits);
        return {
          result: true,
          mode: 'state',
          committed: () => (this.#limits = new Map(Object.entries(limits))),
        };
      }),
    );
  }

  async setLimits(model: string, patch: Partial<QuotaLimits>): Promise<QuotaLimits> {
    return this.#serial(() =>
      this.#transact(({ state }) => {
        const result = { ...patchLimits(state, model, patch) };
        return {
          result,
          mode: 'state',
          committed: () => {
            if (this.#limits.has(model)) this.#limits.set(model, result);
          },
        };
      }),
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
    this.#link.close();
    await this.#chain;
    try {
      await this.#redis.quit();
    } catch {
      this.#redis.disconnect(); // not connected: nothing to say goodbye to
    }
  }
}
