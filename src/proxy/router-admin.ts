import { z } from 'zod';
import type { RouterConfig } from '../config/schema.js';
import { PolicySpecError, parsePolicySpec, type PolicySpec } from '../config/policy-spec.js';
import { backendRefs, createPolicy, type PolicyDeps } from '../core/policies/index.js';
import type { Scheduler } from '../core/scheduler.js';
import type { Decision, Policy } from '../core/types.js';
import type { Admission } from '../admission/service.js';
import type { BackendConfig, Fleet } from '../fleet/fleet.js';
import type { Logger } from 'pino';
import { AdminError, type AdminTarget } from './admin.js';
import type { DecisionLog } from './decision-log.js';
import { now } from './flight.js';
import type { StallWatch } from './stall-watch.js';

/** Parses one backend entry the way the config file does (admin API adds backends with it). */
export type BackendParser = (body: unknown) => BackendConfig;

/**
 * What the admin operations change on the router that owns them (the Router implements it).
 * Declared here, on the lower side, so router.ts imports router-admin.ts and never the other way.
 */
export interface RouterAdminHost {
  /** The current configuration: replaced by a policy change or a reload. */
  settings: RouterConfig;
  readonly scheduler: Scheduler;
  readonly fleet: Fleet;
  readonly admission: Admission;
  readonly log: Logger;
  readonly stalls: StallWatch;
  readonly decisionLog: DecisionLog;
  readonly random: () => number;
  /** Set when the admin API may add backends. */
  readonly parseBackend?: BackendParser | undefined;
  /** Carry out the scheduler's decisions. */
  apply(ds: readonly Decision[]): void;
  /** What a policy built here is lent (the `rl` weights reader). */
  readonly policyDeps: PolicyDeps;
  /** Hooks a new policy's explanations into the decision log (and the shared view). */
  explained(policy: Policy): Policy;
}

const BackendPatch = z.strictObject({
  weight: z.number().positive().optional(),
  maxConcurrency: z.number().int().positive().nullable().optional(),
  region: z.string().min(1).optional(),
  models: z.array(z.string().min(1)).min(1).optional(),
});

/**
 * What the admin API and hot reload change on a running router: backends added, patched,
 * drained, removed; the policy swapped; a whole new configuration applied. Every change is
 * validated before anything is touched (400 and no state changed).
 */
export class RouterAdmin implements AdminTarget {
  constructor(private readonly r: RouterAdminHost) {}

  backendsState(): unknown {
    return {
      policy: this.r.scheduler.policyName,
      queued: this.r.scheduler.queueLength,
      backends: this.r.scheduler.backendViews().map((b) => {
        const rt = this.r.fleet.get(b.name);
        return {
          name: b.name,
          url: rt?.config.url,
          origin: rt?.origin ?? null,
          api: b.api,
          models: [...b.models],
          healthy: b.healthy,
          draining: b.draining,
          inFlight: b.inFlight,
          maxConcurrency: Number.isFinite(b.maxConcurrency) ? b.maxConcurrency : null,
          weight: b.weight,
          region: b.region ?? null,
          queued: this.r.scheduler.queueLength,
          consecutiveFailures: rt?.failures ?? 0,
          lastError: rt?.lastError ?? null,
          problem: rt?.problem ?? null,
          metrics: b.metrics ?? null,
          loadedModels: b.loadedModels ? [...b.loadedModels] : null,
          estimates: this.r.scheduler.describe(b.name),
        };
      }),
    };
  }

  async addBackend(body: unknown): Promise<void> {
    if (!this.r.parseBackend) throw new AdminError(400, 'adding backends is not enabled on this router');
    let cfg: BackendConfig;
    try {
      cfg = this.r.parseBackend(body);
    } catch (err) {
      throw new AdminError(400, (err as Error).message);
    }
    if (this.r.fleet.get(cfg.name)) throw new AdminError(409, `backend '${cfg.name}' already exists`);
    await this.r.fleet.add(cfg, 'admin');
    this.r.log.info({ backend: cfg.name, url: cfg.url }, 'backend added');
  }

  updateBackend(name: string, body: unknown): void {
    if (!this.r.scheduler.backend(name)) throw new AdminError(404, `unknown backend '${name}'`);
    const r = BackendPatch.safeParse(body);
    if (!r.success) {
      throw new AdminError(
        400,
        r.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; '),
      );
    }
    const { maxConcurrency, ...rest } = r.data;
    const patch = {
      ...rest,
      ...(maxConcurrency !== undefined ? { maxConcurrency: maxConcurrency ?? Infinity } : {}),
    };
    this.r.apply(this.r.scheduler.updateBackend(name, patch, now()));
    this.r.log.info({ backend: name, patch: r.data }, 'backend updated');
  }

  drainBackend(name: string, draining: boolean): void {
    if (!this.r.scheduler.backend(name)) throw new AdminError(404, `unknown backend '${name}'`);
    this.r.apply(this.r.scheduler.setDraining(name, draining, now()));
    this.r.log.info({ backend: name, draining }, draining ? 'backend draining' : 'backend undrained');
  }

  removeBackend(name: string): void {
    if (!this.r.fleet.get(name)) throw new AdminError(404, `unknown backend '${name}'`);
    if (backendRefs(this.r.settings.policy).includes(name))
      throw new AdminError(
        409,
        `policy '${this.r.settings.policy.name}' is pinned to '${name}': change the policy first`,
      );
    this.r.fleet.remove(name);
    this.r.stalls.remove(name); // a backend added again under this name starts without history
    this.r.log.info({ backend: name }, 'backend removed');
  }

  /**
   * Body: `{"policy": "least-connections"}`, `{"policy": {"name": "estimated-wait", "alpha": 0.3}}`
   * or the object itself, `{"name": "pinned", "backend": "a"}` (the config file's shape).
   */
  setPolicy(body: unknown): void {
    const obj = body && typeof body === 'object' && !Array.isArray(body) ? (body as object) : undefined;
    const raw = obj && Object.hasOwn(obj, 'policy') ? (obj as { policy?: unknown }).policy : obj;
    let spec: PolicySpec;
    try {
      spec = parsePolicySpec(raw);
    } catch (err) {
      if (!(err instanceof PolicySpecError)) throw err;
      const at = err.path.length > 0 ? `policy.${err.path.join('.')}: ` : 'policy: ';
      throw new AdminError(400, `${at}${err.message}`);
    }
    const known = new Set(this.r.fleet.all().map((rt) => rt.config.name));
    const unknown = backendRefs(spec).filter((b) => !known.has(b));
    if (unknown.length > 0)
      throw new AdminError(
        400,
        `policy '${spec.name}' names unknown backend '${unknown.join("', '")}' (known: ${[...known].join(', ') || 'none'})`,
      );
    let policy;
    try {
      policy = this.r.explained(
        createPolicy(spec, this.r.random, this.r.settings.scheduling, this.r.policyDeps),
      );
    } catch (err) {
      throw new AdminError(400, (err as Error).message);
    }
    this.r.settings = { ...this.r.settings, policy: { name: spec.name, params: spec.params ?? {} } };
    this.r.apply(this.r.scheduler.setPolicy(policy, now()));
    this.r.log.info({ policy: spec.name }, 'policy changed');
  }

  /**
   * Apply a new, already validated configuration without a restart: backends added, removed or
   * changed in place (in-flight requests and estimates kept for those that remain), the policy
   * swapped only if it changed, other settings replaced. The listen address needs a restart.
   */
  async reconfigure(next: RouterConfig): Promise<string[]> {
    const changes: string[] = [];
    const prev = this.r.settings;
    if (next.server.host !== prev.server.host || next.server.port !== prev.server.port) {
      this.r.log.warn('server.host/port changes take effect after a restart');
    }
    if (JSON.stringify(next.discovery.kubernetes) !== JSON.stringify(prev.discovery.kubernetes))
      this.r.log.warn('discovery.kubernetes changes take effect after a restart');
    const wanted = new Map(next.backends.map((b) => [b.name, b]));
    for (const rt of this.r.fleet.all()) {
      // Pods found by discovery.kubernetes come and go with the pool, not with the file.
      if (rt.origin === 'discovery') continue;
      const want = wanted.get(rt.config.name);
      if (
        !want ||
        want.url !== rt.config.url ||
        want.api !== rt.config.api ||
        (want.models === undefined) !== (rt.config.models === undefined)
      ) {
        this.r.fleet.remove(rt.config.name);
        this.r.stalls.remove(rt.config.name);
        changes.push(`removed ${rt.config.name}`);
      }
    }
    for (const b of next.backends) {
      const rt = this.r.fleet.get(b.name);
      if (rt?.origin === 'discovery') {
        this.r.log.warn(
          { backend: b.name },
          "a configured backend has a discovered pod's name: kept the pod",
        );
        continue;
      }
      if (!rt) {
        await this.r.fleet.add(b);
        changes.push(`added ${b.name}`);
        continue;
      }
      const view = this.r.scheduler.backend(b.name);
      if (
        view &&
        (view.weight !== b.weight ||
          view.maxConcurrency !== b.maxConcurrency ||
          view.region !== b.region ||
          (b.models !== undefined && !sameSet(view.models, b.models)))
      ) {
        this.r.apply(
          this.r.scheduler.updateBackend(
            b.name,
            {
              weight: b.weight,
              maxConcurrency: b.maxConcurrency,
              region: b.region,
              ...(b.models ? { models: b.models } : {}),
            },
            now(),
          ),
        );
        rt.config = b;
        changes.push(`updated ${b.name}`);
      }
    }
    this.r.settings = next;
    if (
      next.policy.name !== prev.policy.name ||
      JSON.stringify(next.policy.params) !== JSON.stringify(prev.policy.params) ||
      JSON.stringify(next.scheduling) !== JSON.stringify(prev.scheduling)
    ) {
      this.r.apply(
        this.r.scheduler.setPolicy(
          this.r.explained(createPolicy(next.policy, this.r.random, next.scheduling, this.r.policyDeps)),
          now(),
        ),
      );
      changes.push(`policy ${next.policy.name}`);
    }
    this.r.scheduler.setMaxQueueLength(next.queue.maxLength);
    this.r.log.level = next.log.level;
    changes.push(...(await this.r.admission.reconfigure(next)));
    return changes;
  }

  decisions(limit: number): unknown {
    return this.r.decisionLog.list(limit);
  }
}

function sameSet(a: ReadonlySet<string>, b: readonly string[]): boolean {
  return a.size === new Set(b).size && b.every((x) => a.has(x));
}
