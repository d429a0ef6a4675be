import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { RouterConfig } from '../config/schema.js';
import { Scheduler } from '../core/scheduler.js';
import { backendRefs, createPolicy, type PolicySpec } from '../core/policies/index.js';
import type { ScoreExplanation } from '../core/policies/plugin.js';
import { ProfilePolicy } from '../core/policies/profile.js';
import type { Policy } from '../core/types.js';
import type { CompletionReport, Decision, RequestInfo } from '../core/types.js';
import { Fleet, type BackendConfig, type BackendRuntime } from '../fleet/fleet.js';
import { Dashboard } from '../dashboard/handler.js';
import { LiveStats } from '../dashboard/live-stats.js';
import { RouterMetrics } from '../metrics/router-metrics.js';
import { handleAdmission } from '../admission/http.js';
import { TASK_ID_HEADER, estimateRequestTokens, leaseCovers, passGate } from '../admission/proxy-gate.js';
import { Admission } from '../admission/service.js';
import { AdminError, handleAdmin, type AdminTarget } from './admin.js';
import { admitAdmin, dashboardAllowed, isLoopback } from './admin-auth.js';
import { BodyTooLarge, readBody } from './body.js';
import { sendError, sendJson, type ErrorFormat } from './errors.js';
import { handleFleetRoute } from './fleet-routes.js';
import { BadRequest, PROXY_ROUTES, parseBody, type ParsedRequest, type ProxyRoute } from './routes.js';
import { ollamaToOpenAI } from './translate.js';
import { UpstreamExchange, type ExchangeEnd } from './upstream-exchange.js';
import type { Usage } from './usage.js';

/** The router runs on the config module's validated, normalized configuration. */
export type RouterSettings = RouterConfig;

const HOP_BY_HOP = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'content-length',
  'expect',
]);

/** Why an attempt did not produce a full answer. */
type AttemptResult =
  | { readonly kind: 'done' }
  /** Nothing reached the client: another backend may try. */
  | { readonly kind: 'retry'; readonly error: string; readonly timeout: boolean }
  /** Bytes went out (or the client left): the request is over. */
  | { readonly kind: 'over' };

interface Flight {
  readonly info: RequestInfo;
  readonly route: ProxyRoute;
  readonly parsed: ParsedRequest;
  readonly body: Record<string, unknown>;
  readonly raw: Buffer;
  readonly rid: string;
  readonly format: ErrorFormat;
  readonly headers: string[];
  /** The attempt under way, cancelled when the client leaves. */
  exchange: UpstreamExchange | undefined;
  clientGone: boolean;
  queued: boolean;
  status: number;
  /** Tokens the backend reported generating (for the dashboard's tokens/s). */
  outputTokens: number | undefined;
  /** Client-observed time to the upstream's first byte (ms from arrival), for the dashboard. */
  ttfbMs: number | undefined;
}

const now = (): number => performance.now();

/** Parses one backend entry the way the config file does (admin API adds backends with it). */
export type BackendParser = (body: unknown) => BackendConfig;

/** One routing decision, kept for GET /admin/decisions. */
export interface DecisionRecord {
  readonly at: string;
  readonly requestId: string;
  readonly model: string;
  readonly policy: string;
  readonly backend: string | null;
  readonly outcome: 'dispatch' | 'reject';
  readonly reason?: string;
  readonly queuedMs: number;
  readonly attempt: number;
  /** The profile's scores for this decision: per scorer, per candidate backend. */
  readonly scores?: ScoreExplanation;
}

const DECISIONS_KEPT = 1000;
/** Decisions a second that carry their scores (outside debug level, where all do). */
const EXPLAINED_PER_S = 200;

type StoredDecision = Omit<DecisionRecord, 'at'> & { readonly atMs: number };

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
  private readonly waiters = new Map<string, (d: Decision) => void>();
  private nextId = 0;
  private expireTimer: NodeJS.Timeout | undefined;
  private readonly startedAt = Date.now();
  private readonly decisionLog: StoredDecision[] = [];
  private readonly explanations = new Map<string, ScoreExplanation>();
  /** The current policy when it is a profile (its decisions can be explained). */
  private profile: ProfilePolicy | undefined;
  private explainTokens = EXPLAINED_PER_S;
  private explainRefilledAt = 0;
  /** The request whose submit() is running: its decision may come back at once. */
  private submitting: string | undefined;
  private decisionNext = 0;

  constructor(
    private settings: RouterSettings,
    private readonly log: Logger,
    private readonly random: () => number = Math.random,
    private readonly parseBackend?: BackendParser,
  ) {
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
      (name) => this.metrics.ejections.inc({ backend: name }),
      now,
    );
    this.server = createServer((req, res) => this.handle(req, res, false));
    if (settings.admin?.listen) {
      this.adminServer = createServer((req, res) => this.handle(req, res, true));
      this.adminServer.requestTimeout = 30_000;
    }
    this.server.keepAliveTimeout = 65_000;
    // LLM answers take minutes; the default 5-minute request timeout would cut them.
    this.server.requestTimeout = 0;
    this.server.headersTimeout = 60_000;
  }

  /** Carry out the scheduler's decisions: wake the requests they concern. */
  apply(ds: readonly Decision[]): void {
    for (const d of ds) {
      const w = this.waiters.get(d.request.id);
      if (w) {
        this.waiters.delete(d.request.id);
        w(d);
      }
    }
  }

  async listen(host: string, port: number): Promise<string> {
    await this.admission.start();
    await Promise.all(this.settings.backends.map((b) => this.fleet.add(b)));
    this.fleet.start();
    this.expireTimer = setInterval(() => {
      this.apply(this.scheduler.expire(now(), this.settings.queue.maxWaitMs));
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
    this.dashboard.close();
    for (const srv of [this.server, this.adminServer]) {
      if (!srv?.listening) continue;
      srv.closeAllConnections();
      await new Promise<void>((r) => srv.close(() => r()));
    }
    await this.fleet.close();
    await this.admission.close();
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
    switch (path) {
      case '/healthz':
        return get(() => this.healthz(res));
      case '/metrics':
        return get(() => void this.sendMetrics(res));
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
    if (typeof raw === 'string') spec = { name: raw };
    else if (raw && typeof raw === 'object' && typeof (raw as { name?: unknown }).name === 'string') {
      const { name, ...params } = raw as { name: string };
      spec = { name, params };
    } else throw new AdminError(400, 'body must be {"policy": <name> | {"name": <name>, ...params}}');
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
    const n = Math.min(limit, this.decisionLog.length);
    const out: DecisionRecord[] = [];
    // newest first
    for (let i = 1; i <= n; i++) {
      const { atMs, ...rec } =
        this.decisionLog[(this.decisionNext - i + DECISIONS_KEPT * 2) % DECISIONS_KEPT]!;
      out.push({ at: new Date(atMs).toISOString(), ...rec });
    }
    return { decisions: out };
  }

  /**
   * Profiles report each decision's scores: kept for /admin/decisions and logged at debug. An
   * explanation costs a few µs per pick (arrays of every scorer's scores), so outside debug level
   * at most EXPLAINED_PER_S decisions a second carry one: all of them at ordinary rates, a sample
   * when the router runs flat out.
   */
  private explained(policy: Policy): Policy {
    this.profile = policy instanceof ProfilePolicy ? policy : undefined;
    if (this.profile) this.profile.explain = this.explainHook;
    return policy;
  }

  private readonly explainHook = (e: ScoreExplanation, req: RequestInfo): void => {
    // Only for requests waiting on a decision (a held one is explained again when it goes).
    if (req.id !== this.submitting && !this.waiters.has(req.id)) return;
    this.explanations.set(req.id, e);
    if (--this.explainTokens < 1 && this.profile && !this.log.isLevelEnabled('debug')) {
      this.profile.explain = undefined;
      this.explainRefilledAt = now(); // refills from here
    }
  };

  /** Turns explanations back on once the budget has refilled. */
  private rearmExplain(t: number): void {
    const p = this.profile;
    if (!p || p.explain) return;
    this.explainTokens = Math.min(
      EXPLAINED_PER_S,
      this.explainTokens + ((t - this.explainRefilledAt) * EXPLAINED_PER_S) / 1000,
    );
    this.explainRefilledAt = t;
    if (this.explainTokens >= 1) p.explain = this.explainHook;
  }

  private recordDecision(rec: StoredDecision): void {
    this.decisionLog[this.decisionNext % DECISIONS_KEPT] = rec;
    this.decisionNext = (this.decisionNext + 1) % DECISIONS_KEPT;
    if (this.decisionLog.length > DECISIONS_KEPT) this.decisionLog.length = DECISIONS_KEPT;
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

  private async proxy(req: IncomingMessage, res: ServerResponse, route: ProxyRoute): Promise<void> {
    const t0 = now();
    const given = req.headers['x-request-id'];
    const rid = typeof given === 'string' && given.length > 0 && given.length <= 200 ? given : randomUUID();
    const format: ErrorFormat = route.api;
    // Errors carry the request id too; set per response rather than with setHeader (measurably cheaper).
    const fail = (status: number, message: string, code: string, extra?: Record<string, string>): void =>
      this.reject(res, format, status, message, code, t0, { 'x-request-id': rid, ...extra });

    let raw: Buffer;
    try {
      raw = await readBody(req, this.settings.server.maxBodyBytes);
    } catch (err) {
      if (err instanceof BodyTooLarge) {
        res.setHeader('connection', 'close');
        return fail(413, `body over ${this.settings.server.maxBodyBytes} bytes`, 'body_too_large');
      }
      return; // the client went away while sending
    }
    let parsed: ParsedRequest;
    let body: Record<string, unknown>;
    try {
      ({ body, parsed } = parseBody(route, raw));
    } catch (err) {
      if (err instanceof BadRequest) return fail(400, err.message, err.code);
      throw err;
    }
    const known = this.scheduler.models();
    if (!known.has(parsed.model)) {
      const list = [...known].sort().join(', ');
      return fail(
        404,
        `model '${parsed.model}' not found; available: ${list || '(none)'}`,
        'model_not_found',
      );
    }

    const sk = this.settings.sessionKey;
    const session = req.headers[sk?.header ?? 'x-session-token'];
    // Forward the client's headers as a flat raw list (no object rebuild), minus hop-by-hop ones.
    const rh = req.rawHeaders;
    const headers: string[] = [];
    for (let i = 0; i < rh.length; i += 2) {
      const k = rh[i]!.toLowerCase();
      if (!HOP_BY_HOP.has(k) && k !== 'x-request-id') headers.push(rh[i]!, rh[i + 1]!);
    }
    headers.push('x-request-id', rid);

    const f: Flight = {
      info: {
        id: String(this.nextId++),
        model: parsed.model,
        api: route.api,
        arrivedAt: t0,
        promptText: parsed.promptText,
        maxTokens: parsed.maxTokens,
        sessionKey:
          typeof session === 'string' && session !== ''
            ? session
            : sk && !(sk.bodyPath.length === 1 && sk.bodyPath[0] === 'user')
              ? bodyString(body, sk.bodyPath)
              : parsed.user,
      },
      route,
      parsed,
      body,
      raw,
      rid,
      format,
      headers,
      exchange: undefined,
      clientGone: false,
      queued: false,
      status: 0,
      outputTokens: undefined,
      ttfbMs: undefined,
    };
    res.on('close', () => {
      if (res.writableFinished) return;
      f.clientGone = true;
      f.exchange?.cancel();
      if (f.queued) {
        f.queued = false;
        this.waiters.delete(f.info.id);
        this.explanations.delete(f.info.id);
        this.apply(this.scheduler.cancel(f.info.id, now()).decisions);
      }
    });

    // Per-model quotas: over a target, wait here (not sent, not rejected); lease released on close.
    // Checked first so requests for models without a quota pay nothing, not even an await.
    const taskId = req.headers[TASK_ID_HEADER];
    if (
      this.admission.hasQuota(parsed.model) &&
      !(typeof taskId === 'string' && (await leaseCovers(this.admission, taskId, parsed.model)))
    ) {
      const gate = await passGate(
        this.admission,
        parsed.model,
        estimateRequestTokens(parsed.promptText, parsed.maxTokens),
        res,
        () => f.clientGone,
        this.settings.queue.maxWaitMs,
        this.log,
      );
      if (gate.kind === 'gone') return;
      if (gate.kind === 'fail') {
        const extra =
          gate.retryAfterS !== undefined ? { 'retry-after': String(gate.retryAfterS) } : undefined;
        return fail(gate.status, gate.message, gate.code, extra);
      }
    }

    let tried: Set<string> | undefined; // made on the first dispatch: most requests never retry
    let last: { error: string; timeout: boolean } | undefined;
    let backend = 'none';
    for (let attempt = 0; attempt < this.settings.retry.attempts; attempt++) {
      if (attempt > 0) {
        const base = this.settings.retry.backoffMs * 2 ** (attempt - 1);
        await sleep(Math.min(2000, base * (0.5 + Math.random())));
        if (f.clientGone) break;
      }
      const queuedFrom = now();
      const next = this.schedule(f, tried ?? NONE_TRIED);
      const d = next instanceof Promise ? await next : next;
      const scores = this.explanations.get(f.info.id);
      if (scores) {
        this.explanations.delete(f.info.id);
        if (this.log.isLevelEnabled('debug'))
          this.log.debug({ rid: f.rid, model: parsed.model, attempt: attempt + 1, ...scores }, 'decision');
      }
      if (f.clientGone) break;
      this.recordDecision({
        atMs: Date.now(), // formatted only when read: toISOString per request is measurable
        requestId: f.rid,
        model: parsed.model,
        policy: this.scheduler.policyName,
        backend: d.type === 'dispatch' ? d.backend : null,
        outcome: d.type,
        // Absent fields as undefined (JSON drops them), not spreads: one object per decision.
        reason: d.type === 'reject' ? d.reason : undefined,
        queuedMs: round(now() - queuedFrom),
        attempt: attempt + 1,
        scores,
      });
      if (d.type === 'reject') {
        if (last) break; // retries exhausted the eligible backends: report the upstream error
        const msg =
          d.reason === 'no-backend'
            ? `no healthy backend serves model '${parsed.model}'`
            : d.reason === 'queue-full'
              ? 'router queue is full'
              : 'timed out waiting in the router queue';
        return fail(503, msg, d.reason.replace('-', '_'), { 'retry-after': '1' });
      }
      backend = d.backend;
      (tried ??= new Set()).add(backend);
      const r = await this.attempt(f, res, backend);
      if (r.kind !== 'retry') {
        this.finishLog(f, backend, t0, attempt + 1);
        return;
      }
      last = r;
      if (!f.clientGone) {
        this.metrics.retries.inc({ backend });
        this.stats.record({ backend, at: Date.now(), ok: false, latencyMs: now() - t0, error: r.error });
      }
    }
    if (f.clientGone) {
      f.status = 499;
      this.finishLog(f, backend, t0, tried?.size ?? 0);
      return;
    }
    const timeout = last?.timeout === true;
    fail(
      timeout ? 504 : 502,
      `upstream failed after ${tried?.size ?? 0} attempt(s): ${last?.error ?? 'no backend'}`,
      timeout ? 'upstream_timeout' : 'upstream_error',
    );
  }

  /**
   * Submits the request: its decision when the scheduler makes it at once (the common case: no
   * promise, no waiter), else a promise of it while it waits in the router queue.
   */
  private schedule(f: Flight, tried: ReadonlySet<string>): Decision | Promise<Decision> {
    const t = now();
    this.rearmExplain(t);
    const id = f.info.id;
    this.submitting = id;
    const ds = this.scheduler.submit(f.info, t, tried);
    this.submitting = undefined;
    this.apply(ds); // wakes others this submit let go (ours has no waiter yet)
    for (const d of ds) if (d.request.id === id) return d;
    f.queued = true;
    return new Promise((resolve) => {
      this.waiters.set(id, (d) => {
        f.queued = false;
        resolve(d);
      });
    });
  }

  /** One try on one backend. Calls scheduler.complete exactly once. */
  private attempt(f: Flight, res: ServerResponse, backend: string): Promise<AttemptResult> {
    const rt = this.fleet.get(backend);
    const dispatchedAt = now();
    const settle = (ok: boolean, usage: Usage, firstByteAt: number | undefined): void => {
      const t = now();
      const report: CompletionReport = {
        ok,
        dispatchedAt,
        firstByteAt,
        finishedAt: t,
        promptTokens: usage.promptTokens,
        completionTokens: usage.completionTokens,
        promptEvalMs: usage.promptEvalMs,
        evalMs: usage.evalMs,
      };
      if (ok) {
        f.outputTokens = usage.completionTokens;
        if (firstByteAt !== undefined) f.ttfbMs = firstByteAt - f.info.arrivedAt;
      }
      this.apply(this.scheduler.complete(f.info.id, report, t));
      if (ok) {
        const m = this.metrics.of(backend);
        m.upstreamSeconds.observe((t - dispatchedAt) / 1000);
        if (firstByteAt !== undefined) m.ttfbSeconds.observe((firstByteAt - dispatchedAt) / 1000);
      }
    };
    if (!rt) {
      settle(false, {}, undefined);
      return Promise.resolve({ kind: 'retry', error: `backend '${backend}' was removed`, timeout: false });
    }
    const translate = f.route.ollamaKind !== undefined && rt.config.api === 'openai';
    const tr = translate ? ollamaToOpenAI(f.route.ollamaKind!, f.body, f.parsed.stream) : undefined;
    return new Promise<AttemptResult>((resolve) => {
      const ex = new UpstreamExchange(
        res,
        {
          backend,
          requestId: f.rid,
          format: f.format,
          stream: f.parsed.stream,
          model: f.parsed.model,
          translateFrom: tr ? f.route.ollamaKind : undefined,
          arrivedAt: f.info.arrivedAt,
        },
        now,
        (end: ExchangeEnd) => {
          f.exchange = undefined;
          if (end.kind === 'done') {
            f.status = ex.status;
            if (end.ok) this.fleet.recordSuccess(backend);
            settle(end.ok, end.usage, ex.firstByteAt);
            return resolve(DONE);
          }
          settle(false, {}, ex.firstByteAt);
          if (end.kind === 'over') {
            if (f.clientGone) f.status = 499;
            else {
              f.status = 502;
              this.fleet.recordFailure(backend, end.reason ?? 'failed');
            }
            return resolve(OVER);
          }
          if (f.clientGone) return resolve(OVER);
          // A 429 is the backend saying it is full, not that it is broken.
          if (end.status !== 429) this.fleet.recordFailure(backend, end.reason);
          resolve({ kind: 'retry', error: `${backend}: ${end.reason}`, timeout: end.timeout });
        },
      );
      f.exchange = ex;
      rt.pool.dispatch(
        {
          path: tr?.path ?? f.route.upstreamPath,
          method: 'POST',
          headers: tr ? withJsonContentType(f.headers) : f.headers,
          body: tr?.body ?? f.raw,
          headersTimeout: this.settings.timeouts.firstByteMs,
          bodyTimeout: this.settings.timeouts.idleMs,
        },
        ex,
      );
    });
  }

  private reject(
    res: ServerResponse,
    format: ErrorFormat,
    status: number,
    message: string,
    code: string,
    t0: number,
    headers?: Record<string, string>,
  ): void {
    sendError(res, format, status, message, code, headers);
    this.metrics.countRequest('none', status);
    this.log.info({ status, code, ms: round(now() - t0) }, message);
  }

  private finishLog(f: Flight, backend: string, t0: number, attempts: number): void {
    this.metrics.countRequest(backend, f.status);
    // A client that left is not the backend's failure; 'none' is no backend at all.
    if (f.status !== 499 && backend !== 'none')
      this.stats.record({
        backend,
        at: Date.now(),
        ok: f.status > 0 && f.status < 400,
        latencyMs: now() - t0,
        ttfbMs: f.ttfbMs,
        outputTokens: f.outputTokens,
        error: f.status >= 400 ? `status ${f.status}` : undefined,
      });
    // Build the log record only when it will be written.
    if (!this.log.isLevelEnabled('info')) return;
    this.log.info(
      {
        rid: f.rid,
        path: f.route.upstreamPath,
        model: f.parsed.model,
        backend,
        status: f.status,
        stream: f.parsed.stream,
        attempts,
        ms: round(now() - t0),
        ...(this.settings.log.prompts ? { prompt: f.parsed.promptText } : {}),
      },
      'request',
    );
  }
}

/** A raw header list with its content-type replaced by JSON (the translated body is JSON). */
function withJsonContentType(raw: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2)
    if (raw[i]!.toLowerCase() !== 'content-type') out.push(raw[i]!, raw[i + 1]!);
  out.push('content-type', 'application/json');
  return out;
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

const DONE: AttemptResult = { kind: 'done' };
const NONE_TRIED: ReadonlySet<string> = new Set();
const OVER: AttemptResult = { kind: 'over' };

const round = (ms: number): number => Math.round(ms * 100) / 100;

export type { BackendRuntime };

/** A string (or number) at a dotted path of a JSON body, for a configured session key field. */
function bodyString(body: Record<string, unknown>, path: readonly string[]): string | undefined {
  let v: unknown = body;
  for (const k of path) {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
    v = (v as Record<string, unknown>)[k];
  }
  if (typeof v === 'string') return v === '' ? undefined : v;
  return typeof v === 'number' && Number.isFinite(v) ? String(v) : undefined;
}
