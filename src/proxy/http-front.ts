import type { IncomingMessage, ServerResponse } from 'node:http';
import { handleAdmission } from '../admission/http.js';
import { handlePeerStatus } from '../federation/status-handler.js';
import { PEER_STATUS_PATH } from '../federation/types.js';
import { sendError, sendJson, type ErrorFormat } from '../http/errors.js';
import { handleAdmin, type AdminTarget } from './admin.js';
import { admitAdmin } from './admin-auth.js';
import { handleFleetRoute } from './fleet-routes.js';
import { Flight, type FlightHost } from './flight.js';
import { PROXY_ROUTES, type ProxyRoute } from './routes.js';
import type { BackendView } from '../core/types.js';
import type { PeerStatus } from '../federation/types.js';

/**
 * What the front needs from the router that owns it (the Router implements it): what a Flight
 * needs, plus the ops answers' sources. Declared here, on the lower side, so router.ts imports
 * http-front.ts and never the other way round.
 */
export interface HttpFrontHost extends FlightHost {
  /** The dashboard's routes: true when it answered the request. */
  readonly dashboard: { handle(req: IncomingMessage, res: ServerResponse, path: string): boolean };
  /** The admin API's operations (with `serve --workers N`: applied on every worker). */
  readonly adminApi: AdminTarget;
  /** Date.now() at start, for /healthz's uptime. */
  readonly startedAt: number;
  /** GET /federation/status's answer (routers with a region). */
  peerStatus(): PeerStatus;
  /** GET /metrics's text: this router's registry, or every worker's summed (`serve --workers N`). */
  metricsText(): Promise<string>;
}

/** What the admin listener serves besides /admin. */
const ADMIN_LISTENER_PATHS = /^\/(dashboard(\/.*)?|healthz|readyz|metrics)$/;

/**
 * The router's HTTP dispatch: which path goes where (proxied generation → a Flight; fleet and
 * ops GETs; admission; dashboard; /admin behind admin-auth), and the small ops answers.
 */
export class HttpFront {
  constructor(private readonly r: HttpFrontHost) {}

  handle(req: IncomingMessage, res: ServerResponse, onAdminListener: boolean): void {
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
        `the admin listener serves /admin, /dashboard, /healthz, /readyz and /metrics only`,
        'not_found',
      );
    // HEAD is GET without the body (node drops it for a HEAD request): every GET route answers it.
    // Not the dashboard's: it answers HEAD itself (as GET, its event stream would never end).
    if (req.method === 'HEAD' && !path.startsWith('/dashboard')) req.method = 'GET';
    if (handleFleetRoute(req, res, path, this.r)) return;
    const route = PROXY_ROUTES.get(path);
    if (route) {
      if (req.method !== 'POST') return this.methodNotAllowed(res, path, 'POST');
      void this.proxy(req, res, route).catch((err: unknown) => {
        this.r.log.error({ err }, 'proxy failure');
        sendError(res, route.endpoint.family, 500, 'internal error', 'internal_error');
      });
      return;
    }
    const get = (fn: () => void): void =>
      req.method === 'GET' ? fn() : this.methodNotAllowed(res, path, 'GET');
    // Served by a router with a region (its peers probe it); elsewhere it does not exist.
    if (path === PEER_STATUS_PATH && this.r.settings.region !== undefined)
      return get(() => handlePeerStatus(req, res, () => this.r.peerStatus()));
    switch (path) {
      case '/healthz':
        return get(() => this.healthz(res));
      case '/readyz':
        return get(() => this.readyz(res));
      case '/metrics':
        return get(() => {
          this.sendMetrics(res).catch((err: unknown) => {
            this.r.log.error({ err }, 'metrics answer failed');
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
        if (handleAdmission(req, res, path, this.r.admission)) return;
        if (this.r.dashboard.handle(req, res, path)) return;
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
    if (!admitAdmin(req, res, this.r.settings.admin, onAdminListener)) return;
    if (handleAdmission(req, res, path, this.r.admission)) return;
    void handleAdmin(
      req,
      res,
      path,
      new URLSearchParams(q >= 0 ? url.slice(q + 1) : ''),
      this.r.adminApi,
    ).catch((err: unknown) => {
      this.r.log.error({ err }, 'admin failure');
      sendError(res, 'openai', 500, 'internal error', 'internal_error');
    });
  }

  private methodNotAllowed(res: ServerResponse, path: string, allow: string): void {
    sendError(res, formatOf(path), 405, `method not allowed; use ${allow}`, 'method_not_allowed', { allow });
  }

  /** Liveness: always 200 while the process answers; the detail says what is not serving. */
  private healthz(res: ServerResponse): void {
    const views = this.r.scheduler.backendViews();
    const healthy = takingTraffic(views);
    sendJson(res, 200, {
      status: 'ok',
      backends: views.length,
      healthy,
      ready: healthy > 0,
      // Names only (reasons carry addresses): /admin/backends and the log say why.
      unhealthy: views.filter((b) => !b.healthy).map((b) => b.name),
      undiscovered: this.r.fleet.undiscovered().map((rt) => rt.config.name),
      uptimeS: (Date.now() - this.r.startedAt) / 1000,
    });
  }

  /** Readiness: 503 while no backend can take traffic (a load balancer in front stops sending). */
  private readyz(res: ServerResponse): void {
    const views = this.r.scheduler.backendViews();
    const healthyBackends = takingTraffic(views);
    const ready = healthyBackends > 0;
    sendJson(res, ready ? 200 : 503, { ready, healthyBackends, backends: views.length });
  }

  /** Never rejects: a collector that throws (a quota store read) is a 500, not an un-caught promise. */
  private async sendMetrics(res: ServerResponse): Promise<void> {
    let text: string;
    try {
      text = await this.r.metricsText();
    } catch (err) {
      this.r.log.error({ err }, 'metrics collection failed');
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`metrics collection failed: ${(err as Error).message}\n`);
      return;
    }
    res.writeHead(200, { 'content-type': this.r.metrics.registry.contentType });
    res.end(text);
  }

  private tags(res: ServerResponse): void {
    const seen = new Map<string, unknown>();
    for (const rt of this.r.fleet.all()) {
      if (!this.r.scheduler.backend(rt.config.name)?.healthy) continue;
      for (const t of rt.tags) if (!seen.has(t.name)) seen.set(t.name, t);
    }
    sendJson(res, 200, { models: [...seen.values()] });
  }

  private version(res: ServerResponse): void {
    const v = this.r.fleet.all().find((rt) => rt.version !== undefined)?.version;
    sendJson(res, 200, { version: v ?? '0.0.0' });
  }

  private models(res: ServerResponse): void {
    const data = [...this.r.scheduler.models()]
      .sort()
      .map((id) => ({ id, object: 'model', created: 0, owned_by: 'llmlb' }));
    sendJson(res, 200, { object: 'list', data });
  }

  private proxy(req: IncomingMessage, res: ServerResponse, route: ProxyRoute): Promise<void> {
    return new Flight(this.r, req, res, route).run();
  }
}

function formatOf(path: string): ErrorFormat {
  const route = PROXY_ROUTES.get(path);
  if (route !== undefined) return route.endpoint.family;
  return path.startsWith('/v1/') ? 'openai' : 'ollama';
}

/** Backends that can take traffic: healthy and not draining. */
const takingTraffic = (views: readonly BackendView[]): number =>
  views.filter((b) => b.healthy && !b.draining).length;
