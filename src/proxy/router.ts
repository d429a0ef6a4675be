import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { RouterConfig } from '../config/schema.js';
import { Scheduler } from '../core/scheduler.js';
import { backendRefs, createPolicy } from '../core/policies/index.js';
import { PolicySpecError, parsePolicySpec, type PolicySpec } from '../config/policy-spec.js';
import type { Decision, Policy } from '../core/types.js';
import { Fleet, type BackendConfig, type BackendRuntime } from '../fleet/fleet.js';
import { Dashboard } from '../dashboard/handler.js';
import { LiveStats } from '../dashboard/live-stats.js';
import { RouterMetrics } from '../metrics/router-metrics.js';
import { handleAdmission } from '../admission/http.js';
import { Admission } from '../admission/service.js';
import { AdminError, handleAdmin, type AdminTarget } from './admin.js';
import { admitAdmin, dashboardAllowed, isLoopback } from './admin-auth.js';
import { Cooldowns } from './cooldowns.js';
import { DecisionLog, DecisionWaiters } from './decision-log.js';
import { sendError, sendJson, type ErrorFormat } from '../http/errors.js';
import { AttemptBook, Flight, now, type FederationHook } from './flight.js';
import { availableReplicas } from '../federation/availability.js';
import { Federation } from '../federation/federation.js';
import { PeerProber } from '../federation/prober.js';
import { handlePeerStatus } from '../federation/status-handler.js';
import { PEER_STATUS_PATH, type PeerStatus } from '../federation/types.js';
import { withSharedView } from '../federation/shared-view-policy.js';
import { SharedView } from '../state/shared-view.js';
import { Redis } from 'ioredis';
import { Gauge } from 'prom-client';
import { hostname } from 'node:os';
import { handleFleetRoute } from './fleet-routes.js';
import { PROXY_ROUTES, type ProxyRoute } from './routes.js';
import { StallWatch } from './stall-watch.js';
import { TraceCapture } from '../trace/capture.js';

export type { DecisionRecord } from './decision-log.js';

/** Default limits for settings built in code without them (the config file always sets them). */
const DEFAULT_BODY_TIMEOUT_MS = 30_000;
const DEFAULT_STALL_MIN_MS = 10_000;
const DEFAULT_STALL_FACTOR = 10;

/** The router runs on the config module's validated, normalized configuration. */
export type RouterSettings = RouterConfig;

/** Parses one backend entry the way the config file does (admin API adds backends with it). */
export type BackendParser = (body: unknown) => BackendConfig;

const BackendPatch = z.strictObject({
  weight: z.number().positive().optional(),
  maxConcurrency: z.number().int().positive().nullable().optional(),
  region: z.string().min(1).optional(),
  models: z.array(z.string().min(1)).min(1).optional(),
});

export class Router implements AdminTarget {
  readonly scheduler: Scheduler;
  readonly fleet: Fleet;
  readonly metrics: RouterMetrics;
  readonly stats = new LiveStats();
  readonly dashboard: Dashboard;
  readonly admission: Admission;
  private readonly server: Server;
  /** `admin.listen`'s server: the only place /admin is served when it is set. */
  private readonly adminServer: Server | undefined;
  /** Where the admin API answers (`admin.listen`'s URL once listening), for the start banner. */
  adminUrl: string | undefined;
  readonly waiters = new DecisionWaiters();
  readonly decisionLog: DecisionLog;
  readonly cooldowns = new Cooldowns();
  readonly stalls: StallWatch;
  readonly attempts = new AttemptBook();
  /** The trace of what was routed (`trace:` in the config), for `llmlb whatif`. */
  readonly capture: TraceCapture | undefined;
  /** Peers (issue #19): the forwarding decision and its prober; undefined without `peers`. */
  readonly federation: FederationHook | undefined;
  readonly peers: Federation | undefined;
  private readonly prober: PeerProber | undefined;
  /** Several routers on one fleet (sharedView + state.redis): others' in-flight counts, cap allowances. */
  readonly sharedView: SharedView | undefined;
  private readonly sharedRedis: Redis | undefined;
  private nextId = 0;
  private expireTimer: NodeJS.Timeout | undefined;
  private readonly startedAt = Date.now();

  constructor(
    public settings: RouterSettings,
    readonly log: Logger,
    private readonly random: () => number = Math.random,
    private readonly parseBackend?: BackendParser,
  ) {
    this.decisionLog = new DecisionLog(this.waiters, log, now);
    this.capture = settings.trace
      ? new TraceCapture({ ...settings.trace, prompts: settings.log.prompts })
      : undefined;
    const sv = settings.sharedView;
    const sharedUrl = sv?.redis ?? settings.state?.redis;
    if (sv && sharedUrl) {
      // Its own connection: a round must not queue behind quota traffic, and losing it only
      // switches this router to its own view.
      this.sharedRedis = new Redis(sharedUrl, {
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        commandTimeout: 1000,
      });
      this.sharedRedis.on('error', () => {}); // counted as failed rounds
      this.sharedView = new SharedView(
        this.sharedRedis,
        {
          backends: () =>
            this.fleet.all().map((rt) => ({
              name: rt.config.name,
              inFlight: this.scheduler.backend(rt.config.name)?.inFlight ?? 0,
              cap: rt.config.maxConcurrency,
            })),
          queued: () => this.scheduler.queueLength,
          applyCaps: (caps) => {
            for (const [name, cap] of caps)
              if (this.scheduler.hasBackend(name))
                this.apply(this.scheduler.updateBackend(name, { maxConcurrency: cap }, now()));
          },
        },
        {
          routerId: `${hostname()}-${process.pid}-${Math.floor(random() * 1e9)}`,
          intervalMs: sv.intervalMs,
          ttlMs: sv.ttlMs,
          headroom: sv.headroom,
          prefix: sv.prefix,
        },
      );
    }
    this.stalls = new StallWatch({
      minMs: settings.health.stallMinMs ?? DEFAULT_STALL_MIN_MS,
      factor: settings.health.stallFactor ?? DEFAULT_STALL_FACTOR,
      fallbackMs: settings.timeouts.firstByteMs,
    });
    this.scheduler = new Scheduler({
      policy: this.explained(
        createPolicy(
          { name: settings.policy.name, params: settings.policy.params },
          random,
          settings.scheduling,
        ),
      ),
      maxQueueLength: settings.queue.maxLength,
    });
    this.metrics = new RouterMetrics(() => this.scheduler);
    this.admission = new Admission(settings, log, this.metrics.registry);
    const view = this.sharedView;
    if (view) {
      new Gauge({
        name: 'llmlb_shared_view_up',
        help: '1 while the shared in-flight view reaches Redis; 0: this router routes on its own view',
        registers: [this.metrics.registry],
        collect() {
          this.set(view.up ? 1 : 0);
        },
      });
      new Gauge({
        name: 'llmlb_shared_view_failed_rounds',
        help: 'Shared-view rounds that could not reach Redis since start',
        registers: [this.metrics.registry],
        collect() {
          this.set(view.failures);
        },
      });
    }
    this.dashboard = new Dashboard(this.scheduler, this.stats, {
      backendErrors: (name) => this.fleet.get(name),
      // Read at each request: a reload may change the token.
      authorize: (req) => dashboardAllowed(req, this.settings.admin),
    });
    this.fleet = new Fleet(
      this.scheduler,
      { ...settings.health, connectMs: settings.timeouts.connectMs, refreshMs: settings.discovery.refreshMs },
      log,
      (ds) => this.apply(ds),
      (name) => {
        this.metrics.ejections.inc({ backend: name });
        // Requests already sent there and still waiting for a byte would wait out their timeout.
        this.giveUpOn(name, `backend ${name} was ejected`);
      },
      now,
    );
    const bodyMs = settings.timeouts.bodyMs ?? DEFAULT_BODY_TIMEOUT_MS;
    // Node checks request timeouts every connectionsCheckingInterval (30 s by default): often
    // enough that a slow body is cut near its limit.
    const serverOptions = { connectionsCheckingInterval: Math.min(1000, bodyMs / 2) };
    this.server = createServer(serverOptions, (req, res) => this.handle(req, res, false));
    if (settings.admin?.listen) {
      this.adminServer = createServer((req, res) => this.handle(req, res, true));
      this.adminServer.requestTimeout = 30_000;
    }
    this.server.keepAliveTimeout = 65_000;
    // Receiving a request (headers and body) must finish in time: slow-body clients hold sockets.
    // Answers are not covered: they take minutes.
    this.server.requestTimeout = bodyMs;
    this.server.headersTimeout = Math.min(60_000, bodyMs);
    if (settings.region !== undefined && settings.peers && settings.peers.length > 0) {
      const f = settings.federation;
      const fed = new Federation({
        region: settings.region,
        peers: settings.peers,
        // Both layers use the same policy family (seed 003 §3.2).
        selection: f?.peerSelection ?? (settings.policy.name === 'consistent-hash' ? 'ring' : 'trie'),
        tau: f?.tau,
        ejectMs: f?.ejectMs,
        maxEntries: f?.snapshotMaxEntries,
      });
      this.peers = fed;
      this.federation = {
        route: (info, forwarded) => fed.route(info, forwarded, this.localAvailable() > 0, Date.now()),
        onForwarded: (info, peer) => fed.onForwarded(info, peer),
        onDone: (peer, ok) => fed.onDone(peer, ok, Date.now()),
      };
      this.prober = new PeerProber(fed, {
        intervalMs: f?.probeIntervalMs ?? 100,
        timeoutMs: f?.probeTimeoutMs,
      });
    }
  }

  /** Local replicas with no request pending (what peers probe, and what keeps a request here). */
  private localAvailable(): number {
    return availableReplicas(this.scheduler.backendViews(), now());
  }

  /** GET /federation/status (Algorithm 1, PROBELB). */
  peerStatus(): PeerStatus {
    return {
      region: this.settings.region ?? '',
      availableReplicas: this.localAvailable(),
      queueLength: this.scheduler.queueLength,
    };
  }

  /** Carry out the scheduler's decisions: wake the requests they concern. */
  apply(ds: readonly Decision[]): void {
    this.waiters.apply(ds);
  }

  nextRequestId(): string {
    return String(this.nextId++);
  }

  async listen(host: string, port: number): Promise<string> {
    await this.admission.start();
    await Promise.all(this.settings.backends.map((b) => this.fleet.add(b)));
    this.fleet.start();
    this.prober?.start();
    this.sharedView?.start();
    this.expireTimer = setInterval(() => {
      this.apply(this.scheduler.expire(now(), this.settings.queue.maxWaitMs));
      this.checkStalls();
    }, 1000).unref();
    const url = await listenOn(this.server, host, port);
    const admin = this.settings.admin;
    if (this.adminServer && admin?.listen) {
      this.adminUrl = await listenOn(this.adminServer, admin.listen.host, admin.listen.port);
      if (admin.token === undefined && !isLoopback(admin.listen.host))
        this.log.warn(
          { adminUrl: this.adminUrl },
          'admin API exposed on a non-loopback address without admin.token: anyone who can reach it controls the router',
        );
      this.log.info({ adminUrl: this.adminUrl }, 'admin API listening');
    } else if (admin?.token !== undefined) {
      this.adminUrl = url;
      this.log.info({ adminUrl: url }, 'admin API on the client port (bearer token required)');
    } else this.log.info('admin API closed (no admin.token, no admin.listen)');
    return url;
  }

  async close(): Promise<void> {
    if (this.expireTimer) clearInterval(this.expireTimer);
    this.prober?.stop();
    this.sharedView?.stop();
    this.sharedRedis?.disconnect();
    this.dashboard.close();
    for (const srv of [this.server, this.adminServer]) {
      if (!srv?.listening) continue;
      srv.closeAllConnections();
      await new Promise<void>((r) => srv.close(() => r()));
    }
    await this.fleet.close();
    await this.admission.close();
    await this.capture?.close();
  }

  private handle(req: IncomingMessage, res: ServerResponse, onAdminListener: boolean): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q >= 0 ? url.slice(0, q) : url;
    if (path === '/admin' || path.startsWith('/admin/'))
      return this.admin(req, res, path, url, q, onAdminListener);
    if (onAdminListener && !ADMIN_LISTENER_PATHS.test(path))
      return sendError(
        res,
        'openai',
        404,
        `the admin listener serves /admin, /dashboard, /healthz and /metrics only`,
        'not_found',
      );
    // HEAD is GET without the body (node drops it for a HEAD request): every GET route answers it.
    // Not the dashboard's: it answers HEAD itself (as GET, its event stream would never end).
    if (req.method === 'HEAD' && !path.startsWith('/dashboard')) req.method = 'GET';
    if (handleFleetRoute(req, res, path, this)) return;
    const route = PROXY_ROUTES.get(path);
    if (route) {
      if (req.method !== 'POST') return this.methodNotAllowed(res, path, 'POST');
      void this.proxy(req, res, route).catch((err: unknown) => {
        this.log.error({ err }, 'proxy failure');
        sendError(res, route.api, 500, 'internal error', 'internal_error');
      });
      return;
    }
    const get = (fn: () => void): void =>
      req.method === 'GET' ? fn() : this.methodNotAllowed(res, path, 'GET');
    // Served by a router with a region (its peers probe it); elsewhere it does not exist.
    if (path === PEER_STATUS_PATH && this.settings.region !== undefined)
      return get(() => handlePeerStatus(req, res, () => this.peerStatus()));
    switch (path) {
      case '/healthz':
        return get(() => this.healthz(res));
      case '/metrics':
        return get(() => {
          this.sendMetrics(res).catch((err: unknown) => {
            this.log.error({ err }, 'metrics answer failed');
            if (!res.headersSent) res.writeHead(500);
            res.end();
          });
        });
      case '/api/tags':
        return get(() => this.tags(res));
      case '/api/version':
        return get(() => this.version(res));
      case '/v1/models':
        return get(() => this.models(res));
      default:
        if (handleAdmission(req, res, path, this.admission)) return;
        if (this.dashboard.handle(req, res, path)) return;
        return sendError(
          res,
          formatOf(path),
          404,
          `no route for ${req.method ?? 'GET'} ${path}`,
          'not_found',
        );
    }
  }

  /** /admin/*: let in by admin-auth.ts (token, listener, CSRF), then the quota or fleet routes. */
  private admin(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    url: string,
    q: number,
    onAdminListener: boolean,
  ): void {
    if (!admitAdmin(req, res, this.settings.admin, onAdminListener)) return;
    if (handleAdmission(req, res, path, this.admission)) return;
    void handleAdmin(req, res, path, new URLSearchParams(q >= 0 ? url.slice(q + 1) : ''), this).catch(
      (err: unknown) => {
        this.log.error({ err }, 'admin failure');
        sendError(res, 'openai', 500, 'internal error', 'internal_error');
      },
    );
  }

  private methodNotAllowed(res: ServerResponse, path: string, allow: string): void {
    sendError(res, formatOf(path), 405, `method not allowed; use ${allow}`, 'method_not_allowed', { allow });
  }

  backendsState(): unknown {
    return {
      policy: this.scheduler.policyName,
      queued: this.scheduler.queueLength,
      backends: this.scheduler.backendViews().map((b) => {
        const rt = this.fleet.get(b.name);
        return {
          name: b.name,
          url: rt?.config.url,
          api: b.api,
          models: [...b.models],
          healthy: b.healthy,
          draining: b.draining,
          inFlight: b.inFlight,
          maxConcurrency: Number.isFinite(b.maxConcurrency) ? b.maxConcurrency : null,
          weight: b.weight,
          region: b.region ?? null,
          queued: this.scheduler.queueLength,
          consecutiveFailures: rt?.failures ?? 0,
          lastError: rt?.lastError ?? null,
          metrics: b.metrics ?? null,
          loadedModels: b.loadedModels ? [...b.loadedModels] : null,
          estimates: this.scheduler.describe(b.name),
        };
      }),
    };
  }

  async addBackend(body: unknown): Promise<void> {
    if (!this.parseBackend) throw new AdminError(400, 'adding backends is not enabled on this router');
    let cfg: BackendConfig;
    try {
      cfg = this.parseBackend(body);
    } catch (err) {
      throw new AdminError(400, (err as Error).message);
    }
    if (this.fleet.get(cfg.name)) throw new AdminError(409, `backend '${cfg.name}' already exists`);
    await this.fleet.add(cfg);
    this.log.info({ backend: cfg.name, url: cfg.url }, 'backend added');
  }

  updateBackend(name: string, body: unknown): void {
    if (!this.scheduler.backend(name)) throw new AdminError(404, `unknown backend '${name}'`);
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
    this.apply(this.scheduler.updateBackend(name, patch, now()));
    this.log.info({ backend: name, patch: r.data }, 'backend updated');
  }

  drainBackend(name: string, draining: boolean): void {
    if (!this.scheduler.backend(name)) throw new AdminError(404, `unknown backend '${name}'`);
    this.apply(this.scheduler.setDraining(name, draining, now()));
    this.log.info({ backend: name, draining }, draining ? 'backend draining' : 'backend undrained');
  }

  removeBackend(name: string): void {
    if (!this.fleet.get(name)) throw new AdminError(404, `unknown backend '${name}'`);
    if (backendRefs(this.settings.policy).includes(name))
      throw new AdminError(
        409,
        `policy '${this.settings.policy.name}' is pinned to '${name}': change the policy first`,
      );
    this.fleet.remove(name);
    this.log.info({ backend: name }, 'backend removed');
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
    const known = new Set(this.fleet.all().map((rt) => rt.config.name));
    const unknown = backendRefs(spec).filter((b) => !known.has(b));
    if (unknown.length > 0)
      throw new AdminError(
        400,
        `policy '${spec.name}' names unknown backend '${unknown.join("', '")}' (known: ${[...known].join(', ') || 'none'})`,
      );
    let policy;
    try {
      policy = this.explained(createPolicy(spec, this.random, this.settings.scheduling));
    } catch (err) {
      throw new AdminError(400, (err as Error).message);
    }
    this.settings = { ...this.settings, policy: { name: spec.name, params: spec.params ?? {} } };
    this.apply(this.scheduler.setPolicy(policy, now()));
    this.log.info({ policy: spec.name }, 'policy changed');
  }

  /**
   * Apply a new, already validated configuration without a restart: backends added, removed or
   * changed in place (in-flight requests and estimates kept for those that remain), the policy
   * swapped only if it changed, other settings replaced. The listen address needs a restart.
   */
  async reconfigure(next: RouterSettings): Promise<string[]> {
    const changes: string[] = [];
    const prev = this.settings;
    if (next.server.host !== prev.server.host || next.server.port !== prev.server.port) {
      this.log.warn('server.host/port changes take effect after a restart');
    }
    const wanted = new Map(next.backends.map((b) => [b.name, b]));
    for (const rt of this.fleet.all()) {
      const want = wanted.get(rt.config.name);
      if (
        !want ||
        want.url !== rt.config.url ||
        want.api !== rt.config.api ||
        (want.models === undefined) !== (rt.config.models === undefined)
      ) {
        this.fleet.remove(rt.config.name);
        changes.push(`removed ${rt.config.name}`);
      }
    }
    for (const b of next.backends) {
      const rt = this.fleet.get(b.name);
      if (!rt) {
        await this.fleet.add(b);
        changes.push(`added ${b.name}`);
        continue;
      }
      const view = this.scheduler.backend(b.name);
      if (
        view &&
        (view.weight !== b.weight ||
          view.maxConcurrency !== b.maxConcurrency ||
          view.region !== b.region ||
          (b.models !== undefined && !sameSet(view.models, b.models)))
      ) {
        this.apply(
          this.scheduler.updateBackend(
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
    this.settings = next;
    if (
      next.policy.name !== prev.policy.name ||
      JSON.stringify(next.policy.params) !== JSON.stringify(prev.policy.params) ||
      JSON.stringify(next.scheduling) !== JSON.stringify(prev.scheduling)
    ) {
      this.apply(
        this.scheduler.setPolicy(
          this.explained(createPolicy(next.policy, this.random, next.scheduling)),
          now(),
        ),
      );
      changes.push(`policy ${next.policy.name}`);
    }
    this.scheduler.setMaxQueueLength(next.queue.maxLength);
    this.log.level = next.log.level;
    changes.push(...(await this.admission.reconfigure(next)));
    return changes;
  }

  decisions(limit: number): unknown {
    return this.decisionLog.list(limit);
  }

  /** Hooks a new policy's explanations into the decision log. */
  private explained(policy: Policy): Policy {
    // With a shared view, in-flight-counting policies see the other routers' requests too.
    const view = this.sharedView;
    return this.decisionLog.explained(view ? withSharedView(policy, view.othersOf) : policy);
  }

  /** Gives up the attempts waiting on a backend that was ejected or found stuck: they retry elsewhere. */
  private giveUpOn(name: string, reason: string): void {
    const n = this.attempts.abandonWaiting(name, reason);
    if (n > 0) this.log.warn({ backend: name, requests: n, reason }, 'requests moved off backend');
  }

  /** Backends that hang while their probes answer: ejected, kept out a while, their requests retried. */
  private checkStalls(): void {
    const t = now();
    for (const s of this.stalls.check(t)) {
      this.fleet.quarantine(s.backend, `no progress for ${Math.round(s.silentMs)} ms`);
      this.giveUpOn(s.backend, `backend ${s.backend} made no progress for ${Math.round(s.silentMs)} ms`);
    }
  }

  private healthz(res: ServerResponse): void {
    const views = this.scheduler.backendViews();
    const healthy = views.filter((b) => b.healthy && !b.draining).length;
    sendJson(res, 200, {
      status: 'ok',
      backends: views.length,
      healthy,
      uptimeS: (Date.now() - this.startedAt) / 1000,
    });
  }

  /** Never rejects: a collector that throws (a quota store read) is a 500, not an un-caught promise. */
  private async sendMetrics(res: ServerResponse): Promise<void> {
    let text: string;
    try {
      text = await this.metrics.registry.metrics();
    } catch (err) {
      this.log.error({ err }, 'metrics collection failed');
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`metrics collection failed: ${(err as Error).message}\n`);
      return;
    }
    res.writeHead(200, { 'content-type': this.metrics.registry.contentType });
    res.end(text);
  }

  private tags(res: ServerResponse): void {
    const seen = new Map<string, unknown>();
    for (const rt of this.fleet.all()) {
      if (!this.scheduler.backend(rt.config.name)?.healthy) continue;
      for (const t of rt.tags) if (!seen.has(t.name)) seen.set(t.name, t);
    }
    sendJson(res, 200, { models: [...seen.values()] });
  }

  private version(res: ServerResponse): void {
    const v = this.fleet.all().find((rt) => rt.version !== undefined)?.version;
    sendJson(res, 200, { version: v ?? '0.0.0' });
  }

  private models(res: ServerResponse): void {
    const data = [...this.scheduler.models()]
      .sort()
      .map((id) => ({ id, object: 'model', created: 0, owned_by: 'llmlb' }));
    sendJson(res, 200, { object: 'list', data });
  }

  private proxy(req: IncomingMessage, res: ServerResponse, route: ProxyRoute): Promise<void> {
    return new Flight(this, req, res, route).run();
  }
}

function sameSet(a: ReadonlySet<string>, b: readonly string[]): boolean {
  return a.size === new Set(b).size && b.every((x) => a.has(x));
}

/** What the admin listener serves besides /admin. */
const ADMIN_LISTENER_PATHS = /^\/(dashboard(\/.*)?|healthz|metrics)$/;

async function listenOn(server: Server, host: string, port: number): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const h = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `http://${h}:${addr.port}`;
}

function formatOf(path: string): ErrorFormat {
  return path.startsWith('/v1/') ? 'openai' : 'ollama';
}

export type { BackendRuntime };
