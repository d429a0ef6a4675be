import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { RouterConfig } from '../config/schema.js';
import { Scheduler } from '../core/scheduler.js';
import { createPolicy, type PolicyDeps } from '../core/policies/index.js';
import type { Decision, Policy } from '../core/types.js';
import { Fleet, type BackendRuntime } from '../fleet/fleet.js';
import { Dashboard } from '../dashboard/handler.js';
import { LiveStats } from '../dashboard/live-stats.js';
import { RouterMetrics } from '../metrics/router-metrics.js';
import { Admission } from '../admission/service.js';
import { dashboardAllowed, isLoopback } from './admin-auth.js';
import { Cooldowns } from './cooldowns.js';
import { traced, traceSink } from './decision-trace.js';
import { DecisionLog, DecisionWaiters } from './decision-log.js';
import { ObjectiveTable } from './objectives.js';
import { AttemptBook } from './attempt-book.js';
import { now, type FederationHook } from './flight.js';
import { availableReplicas } from '../federation/availability.js';
import { Federation } from '../federation/federation.js';
import { PeerProber } from '../federation/prober.js';
import { QueuedForwards } from '../federation/queue-forward.js';
import type { PeerStatus } from '../federation/types.js';
import { withSharedView } from '../federation/shared-view-policy.js';
import { SharedView, type SharedViewTransport } from '../state/shared-view.js';
import { SharedState, type StateTransport } from '../state/shared-state.js';
import { sharingLinks } from './sharing-links.js';
import { allowancePick, type AllowanceWait } from './allowance-pick.js';
import { Redis } from 'ioredis';
import { HttpFront } from './http-front.js';
import { registerSharingMetrics } from './sharing-metrics.js';
import { routerFederation } from './router-federation.js';
import { RouterAdmin, type BackendParser } from './router-admin.js';
import { broadcastingAdmin, type AdminChange } from './admin-broadcast.js';
import type { AdminTarget } from './admin.js';
import { StallWatch } from './stall-watch.js';
import { TraceCapture } from '../trace/capture.js';
import { readRlWeights } from '../rl/weights-file.js';

export type { DecisionRecord } from './decision-log.js';

/** Default limits for settings built in code without them (the config file always sets them). */
const DEFAULT_BODY_TIMEOUT_MS = 30_000;
const DEFAULT_STALL_MIN_MS = 10_000;
const DEFAULT_STALL_FACTOR = 10;

/** The proxy's server, and `admin.listen`'s when set, with their timeouts (not listening yet). */
function httpServers(
  settings: RouterConfig,
  handle: (req: IncomingMessage, res: ServerResponse, admin: boolean) => void,
): { server: Server; adminServer: Server | undefined } {
  const bodyMs = settings.timeouts.bodyMs ?? DEFAULT_BODY_TIMEOUT_MS;
  // Node checks request timeouts every connectionsCheckingInterval (30 s by default): often
  // enough that a slow body is cut near its limit.
  const serverOptions = { connectionsCheckingInterval: Math.min(1000, bodyMs / 2) };
  const server = createServer(serverOptions, (req, res) => handle(req, res, false));
  let adminServer: Server | undefined;
  if (settings.admin?.listen) {
    adminServer = createServer((req, res) => handle(req, res, true));
    adminServer.requestTimeout = 30_000;
  }
  server.keepAliveTimeout = 65_000;
  // Receiving a request (headers and body) must finish in time: slow-body clients hold sockets.
  // Answers are not covered: they take minutes.
  server.requestTimeout = bodyMs;
  server.headersTimeout = Math.min(60_000, bodyMs);
  return { server, adminServer };
}

/** The router runs on the config module's validated, normalized configuration. */
export type RouterSettings = RouterConfig;

export type { BackendParser };

/** What the process hosting a router lends it (`serve --workers N`: the cluster primary's parts). */
export interface RouterHostOptions {
  /**
   * Share the in-flight view and split caps through this transport (the primary's book) when
   * the config has no `sharedView` of its own over Redis.
   */
  readonly viewTransport?: SharedViewTransport;
  /** Shared-view round period over viewTransport (IPC is cheap: default 20 ms). */
  readonly viewIntervalMs?: number;
  /** GET /metrics's text (the primary's sum over workers); default: this router's registry. */
  readonly metricsText?: () => Promise<string>;
  /** Shared-state batches to and from the other workers (the primary relays them), with `sharedState`. */
  readonly stateTransport?: StateTransport;
  /** This router's shared-state id on stateTransport (the primary's name for the worker). */
  readonly stateRouterId?: string;
  /** Admin API changes applied here, handed on for the other workers to apply. */
  readonly adminBroadcast?: (c: AdminChange) => void;
}

export class Router {
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
  /** InferenceObjective priorities (the config's `objectives`, and Kubernetes' when discovered). */
  readonly objectives = new ObjectiveTable();
  /** The trace of what was routed (`trace:` in the config), for `llmlb whatif`. */
  readonly capture: TraceCapture | undefined;
  /** Peers (issue #19): the forwarding decision and its prober; undefined without `peers`. */
  readonly federation: FederationHook | undefined;
  readonly peers: Federation | undefined;
  /** Own clients' requests in the router queue that a peer freeing up may still take. */
  readonly queuedForwards: QueuedForwards | undefined;
  private readonly prober: PeerProber | undefined;
  /** Several routers on one fleet (sharedView + state.redis): others' in-flight counts, cap allowances. */
  readonly sharedView: SharedView | undefined;
  private readonly sharedRedis: Redis | undefined;
  /** N routers as one (sharedState): the others' pushes and answers, applied to this router's policy. */
  readonly sharedState: SharedState | undefined;
  /** The policy the others' pushes and answers are applied to (inside the shared-view wrapper). */
  private stateInner: Policy | undefined;
  /** Per backend: the engine metrics the others' pushes since were counted from. */
  private readonly stateMetricsSeen = new Map<string, unknown>();
  /** sharedState: the allowance this router may fill per capped backend (the shared view's split). */
  private readonly allowances = new Map<string, number>();
  /** sharedState: requests held for want of allowance on the backend their policy chose. */
  private readonly waitingFor = new Map<string, AllowanceWait>();
  /** sharedState: requests that waited for allowance, and their waits summed (ms), for /metrics. */
  readonly allowanceWaits = { count: 0, totalMs: 0 };
  /** What policies built here are lent: the `rl` policy's weights reader (at creation, never per request). */
  readonly policyDeps: PolicyDeps = { rlWeights: readRlWeights };
  private nextId = 0;
  private expireTimer: NodeJS.Timeout | undefined;
  readonly startedAt = Date.now();
  /** The admin API's operations (and hot reload's). */
  readonly adminOps = new RouterAdmin(this);
  /** What the admin API calls: adminOps, and with `serve --workers N` every other worker too. */
  readonly adminApi: AdminTarget;
  private readonly front = new HttpFront(this);

  constructor(
    public settings: RouterSettings,
    readonly log: Logger,
    readonly random: () => number = Math.random,
    readonly parseBackend?: BackendParser,
    private readonly hostOpts: RouterHostOptions = {},
  ) {
    this.adminApi = hostOpts.adminBroadcast
      ? broadcastingAdmin(this.adminOps, hostOpts.adminBroadcast)
      : this.adminOps;
    this.decisionLog = new DecisionLog(this.waiters, log, now);
    this.capture = settings.trace
      ? new TraceCapture({ ...settings.trace, prompts: settings.log.prompts })
      : undefined;
    const sv = settings.sharedView;
    const links = sharingLinks(settings, hostOpts, random);
    this.sharedRedis = links.redis;
    const { transport, stateTransport, routerIdOf } = links;
    const ss = settings.sharedState;
    if (ss && stateTransport) {
      this.sharedState = new SharedState(
        stateTransport,
        {
          backend: (name) => this.scheduler.backend(name),
          remoteDispatch: (req, b) => this.stateInner?.onDispatch?.(req, b, now()),
          remoteComplete: (req, b, report) => this.stateInner?.onComplete?.(req, b, report, now()),
          changed: (names) => {
            const t = now();
            for (const n of names)
              if (this.scheduler.hasBackend(n)) this.apply(this.scheduler.updateBackend(n, {}, t));
          },
        },
        {
          routerId: routerIdOf(),
          promptChars: ss.promptChars,
          heartbeatMs: ss.heartbeatMs,
          ttlMs: ss.ttlMs,
        },
      );
    } else if (ss)
      log.warn('sharedState needs sharedView over Redis, or serve --workers N: this router shares nothing');
    if (transport) {
      this.sharedView = new SharedView(
        transport,
        {
          backends: () =>
            this.fleet.all().map((rt) => ({
              name: rt.config.name,
              inFlight: this.scheduler.backend(rt.config.name)?.inFlight ?? 0,
              cap: rt.config.maxConcurrency,
            })),
          queued: () => this.scheduler.queueLength,
          applyCaps: (caps) => {
            if (settings.sharedState && stateTransport) {
              // One router's view: the scheduler keeps the configured caps, the allowance is
              // checked on the backend the policy chose (sharing()).
              for (const [name, cap] of caps) {
                if (this.allowances.get(name) === cap) continue;
                this.allowances.set(name, cap);
                if (this.scheduler.hasBackend(name))
                  this.apply(this.scheduler.updateBackend(name, {}, now()));
              }
              return;
            }
            for (const [name, cap] of caps)
              if (this.scheduler.hasBackend(name))
                this.apply(this.scheduler.updateBackend(name, { maxConcurrency: cap }, now()));
          },
          ...(settings.sharedState && stateTransport
            ? {
                demand: (name: string) => this.demandFor(name),
                waitedMs: (name: string) => this.waitedFor(name),
              }
            : {}),
        },
        {
          routerId: routerIdOf(),
          intervalMs: sv?.intervalMs ?? hostOpts.viewIntervalMs ?? 20,
          ttlMs: sv?.ttlMs,
          headroom: sv?.headroom,
          prefix: sv?.prefix,
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
          this.policyDeps,
        ),
      ),
      maxQueueLength: settings.queue.maxLength,
    });
    this.metrics = new RouterMetrics(
      () => this.scheduler,
      () => this.capture,
    );
    this.admission = new Admission(settings, log, this.metrics.registry);
    registerSharingMetrics(this.metrics.registry, this.sharedView, this.sharedState, this.allowanceWaits);
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
    const servers = httpServers(settings, (req, res, admin) => this.front.handle(req, res, admin));
    this.server = servers.server;
    this.adminServer = servers.adminServer;
    const fed = routerFederation(settings, () => this.localAvailable() > 0);
    this.peers = fed?.peers;
    this.queuedForwards = fed?.queuedForwards;
    this.federation = fed?.hook;
    this.prober = fed?.prober;
  }

  /** GET /metrics's text. */
  metricsText(): Promise<string> {
    return this.hostOpts.metricsText ? this.hostOpts.metricsText() : this.metrics.registry.metrics();
  }

  /** Local replicas with no request pending (what peers probe, and what keeps a request here). */
  private localAvailable(): number {
    return availableReplicas(this.scheduler.backendViews(), now());
  }

  /** GET /federation/status (Algorithm 1, PROBELB): what this router lends its peers. */
  peerStatus(): PeerStatus {
    return {
      region: this.settings.region ?? '',
      availableReplicas: availableReplicas(
        this.scheduler.backendViews(),
        now(),
        this.settings.federation?.lendKvBelow ?? 1,
      ),
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
    this.sharedState?.start();
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
    this.sharedState?.stop();
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

  /** Apply a new, already validated configuration without a restart (see RouterAdmin). */
  reconfigure(next: RouterSettings): Promise<string[]> {
    return this.adminOps.reconfigure(next);
  }

  /** Hooks a new policy's explanations into the decision log. */
  explained(policy: Policy): Policy {
    // With a shared view, in-flight-counting policies see the other routers' requests too.
    const state = this.sharedState;
    if (state)
      return this.decisionLog.explained(
        traced(this.sharing(policy, state), traceSink(), {
          othersOf: state.othersOf,
          allowance: (n) => this.allowances.get(n),
          waitingFor: (id) => this.waitingFor.get(id)?.backend,
        }),
      );
    const view = this.sharedView;
    return this.decisionLog.explained(traced(view ? withSharedView(policy, view.othersOf) : policy));
  }

  /** Requests held for want of allowance on `backend` in the last second (the round asks for them). */
  private demandFor(backend: string): number {
    const t = now();
    let n = 0;
    for (const [id, w] of this.waitingFor) {
      if (t - w.at > 1000)
        this.waitingFor.delete(id); // gone unseen (cancelled, timed out)
      else if (w.backend === backend) n++;
    }
    return n;
  }

  /** How long the oldest request still waiting for allowance on `backend` has waited, in ms (0: none). */
  private waitedFor(backend: string): number {
    const t = now();
    let oldest = t;
    for (const w of this.waitingFor.values())
      if (w.backend === backend && t - w.at <= 1000 && w.first < oldest) oldest = w.first;
    return t - oldest;
  }

  /**
   * sharedState: the policy sees the others' requests in flight (as heard) and their pushes and
   * answers since the engine metrics were read; every push and answer it makes is published after
   * it saw it, and the others' are applied to it (the simulator's shared-state, src/sim/shared-state.ts).
   */
  private sharing(policy: Policy, state: SharedState): Policy {
    this.stateInner = policy;
    const since = (name: string): { readonly dispatched: number; readonly completed: number } => {
      const m = this.scheduler.backend(name)?.metrics;
      if (this.stateMetricsSeen.get(name) !== m) {
        // Metrics read since: they count what every router pushed before.
        this.stateMetricsSeen.set(name, m);
        state.resetSince(name);
      }
      return state.othersSince(name);
    };
    const wrapped = withSharedView(policy, state.othersOf, since);
    const out: { -readonly [K in keyof Policy]: Policy[K] } = wrapped;
    // The policy chooses as one router would, among backends with room in the whole fleet; the
    // choice goes out only within this router's allowance (allowance-pick.ts).
    out.pick = allowancePick(
      wrapped.pick,
      {
        othersOf: state.othersOf,
        allowance: (name) => this.allowances.get(name),
        nudge: () => this.sharedView?.nudge(),
        now,
      },
      this.waitingFor,
      this.allowanceWaits,
    );
    const onDispatch = wrapped.onDispatch;
    const onComplete = wrapped.onComplete;
    out.onDispatch = (req, b, at) => {
      onDispatch?.(req, b, at);
      state.published(req, b.name);
    };
    out.onComplete = (req, b, report, at) => {
      onComplete?.(req, b, report, at);
      state.answered(req, b.name, report);
      // The slot this router held there goes back to the book now, for a router waiting for it.
      this.sharedView?.nudge();
    };
    return wrapped;
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
}

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

export type { BackendRuntime };
