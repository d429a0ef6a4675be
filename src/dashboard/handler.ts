import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { BackendView } from '../core/types.js';
import type { FleetSecond, LiveStats, RecentError } from './live-stats.js';

/** What the dashboard reads from the router: the scheduler satisfies it as it is. */
export interface DashboardSource {
  readonly policyName: string;
  /** Requests waiting in the router's own queue (not yet given to any backend). */
  readonly queueLength: number;
  backendViews(): readonly Pick<
    BackendView,
    'name' | 'healthy' | 'draining' | 'inFlight' | 'maxConcurrency' | 'weight' | 'metrics'
  >[];
  /** The policy's per-backend estimates (names and units are the policy's own). */
  describe(name: string): Readonly<Record<string, number>>;
}

/** What the fleet last saw go wrong with a backend (health probes included). */
export interface BackendErrorInfo {
  readonly lastError?: string | undefined;
  /** Wall-clock ms. */
  readonly lastErrorAt?: number | undefined;
}

export interface DashboardOptions {
  /** Adds probe failures to the recent errors; the router passes `(name) => fleet.get(name)`. */
  readonly backendErrors?: (name: string) => BackendErrorInfo | undefined;
  /** How often pages get a snapshot (default 1000 ms). */
  readonly intervalMs?: number;
  /** Wall clock (default Date.now); tests pass their own. */
  readonly clock?: () => number;
  /**
   * Whether a request may read the event stream (it names backends and their errors); the router
   * applies the admin token when one is set. Default: everyone.
   */
  readonly authorize?: (req: IncomingMessage) => boolean;
}

/** One backend's row in an event. */
export interface BackendRow {
  readonly name: string;
  readonly healthy: boolean;
  readonly draining: boolean;
  readonly inFlight: number;
  readonly maxConcurrency: number | null;
  readonly weight: number;
  readonly engineRunning: number | null;
  readonly engineWaiting: number | null;
  readonly kvUsage: number | null;
  readonly requestsPerS: number;
  readonly errorsPerS: number;
  readonly tokensPerS: number;
  /** Successful generation requests per second whose tokens the backend did not report. */
  readonly uncountedPerS: number;
  readonly p50LatencyMs: number | null;
  readonly p95LatencyMs: number | null;
  /** The policy's headline estimate for this backend, when it keeps one (see mainEstimate). */
  readonly estimate: MainEstimate | null;
  readonly estimates: Readonly<Record<string, number>>;
  /** Oldest first. */
  readonly recentErrors: readonly RecentError[];
}

/** What a page receives each interval on /dashboard/events. */
export interface DashboardEvent {
  /** Wall-clock ms. */
  readonly t: number;
  readonly policy: string;
  /** Router queue length (the fleet's; requests are not queued per backend). */
  readonly queued: number;
  readonly backends: readonly BackendRow[];
  /** The last complete second. */
  readonly fleet: {
    readonly t: number;
    readonly completedPerS: number;
    readonly failedPerS: number;
    readonly tokensPerS: number;
    /** Completed generation requests whose tokens are unknown (not in tokensPerS). */
    readonly uncountedPerS: number;
    readonly meanLatencyMs: number | null;
    readonly meanTtfbMs: number | null;
  };
  /** Only in a page's first event: the fleet's seconds so far (up to the stats window). */
  readonly history?: readonly FleetSecond[];
}

interface Asset {
  readonly type: string;
  readonly body: Buffer;
}

const require = createRequire(import.meta.url);

/** Read once per process, from the package itself: no CDN. */
let assets: ReadonlyMap<string, Asset> | undefined;
function loadAssets(): ReadonlyMap<string, Asset> {
  const js = 'text/javascript; charset=utf-8';
  const local = (file: string): Buffer => {
    try {
      return readFileSync(new URL(file, import.meta.url));
    } catch (err) {
      // dist/ built by tsc alone, without scripts/copy-assets.mjs
      throw new Error(`dashboard asset ${file} is missing beside handler.js (npm run build copies it)`, {
        cause: err,
      });
    }
  };
  assets ??= new Map([
    ['/dashboard', { type: 'text/html; charset=utf-8', body: local('page.html') }],
    ['/dashboard/app.js', { type: js, body: local('app.js') }],
    [
      '/dashboard/uplot.js',
      { type: js, body: readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js')) },
    ],
    [
      '/dashboard/uplot.css',
      { type: 'text/css; charset=utf-8', body: readFileSync(require.resolve('uplot/dist/uPlot.min.css')) },
    ],
  ]);
  return assets;
}

const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  // Everything comes from this server; the page's own <style> block needs inline styles.
  'content-security-policy': "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:",
} as const;

/** A page that stops reading gets dropped once this much is buffered for it. */
const MAX_BUFFERED = 1 << 20;

/**
 * GET /dashboard (the page), /dashboard/{app.js,uplot.js,uplot.css} and /dashboard/events
 * (server-sent events). One timer serves every connected page and stops when the last one leaves.
 */
export class Dashboard {
  private readonly clients = new Set<ServerResponse>();
  private readonly assets = loadAssets();
  private readonly intervalMs: number;
  private readonly clock: () => number;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly source: DashboardSource,
    private readonly stats: LiveStats,
    private readonly opts: DashboardOptions = {},
  ) {
    this.intervalMs = opts.intervalMs ?? 1000;
    this.clock = opts.clock ?? Date.now;
  }

  /** Pages currently subscribed to the event stream. */
  get subscribers(): number {
    return this.clients.size;
  }

  /** Serves the request if its path is the dashboard's and returns true; false otherwise. */
  handle(req: IncomingMessage, res: ServerResponse, path: string): boolean {
    if (path !== '/dashboard' && !path.startsWith('/dashboard/')) return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      sendJson(res, 405, 'method not allowed; use GET', { allow: 'GET, HEAD' });
    } else if (path === '/dashboard/') {
      // The page links its assets relatively (so it also works behind a path prefix).
      res.writeHead(301, { location: '../dashboard', 'content-length': 0 });
      res.end();
    } else if (path === '/dashboard/events') {
      if (this.opts.authorize && !this.opts.authorize(req))
        sendJson(res, 401, 'the event stream needs the admin token: open /dashboard?token=<token>', {
          'www-authenticate': 'Bearer',
        });
      else this.subscribe(req, res);
    } else {
      const asset = this.assets.get(path);
      if (!asset) sendJson(res, 404, `no dashboard asset ${path}`);
      else {
        res.writeHead(200, {
          'content-type': asset.type,
          'content-length': asset.body.length,
          'cache-control': 'no-cache',
          ...SECURITY_HEADERS,
        });
        res.end(asset.body);
      }
    }
    return true;
  }

  /** The event pages receive; `withHistory` adds the fleet's seconds so far. */
  event(withHistory = false): DashboardEvent {
    const t = this.clock();
    const snap = this.stats.snapshot(t);
    const last = snap.fleet.at(-1);
    const fleet = last && last.t === (Math.floor(t / 1000) - 1) * 1000 ? last : this.stats.lastSecond(t);
    return {
      t,
      policy: this.source.policyName,
      queued: this.source.queueLength,
      backends: this.source.backendViews().map((b) => {
        const s = snap.backends.get(b.name);
        const estimates = this.source.describe(b.name);
        return {
          name: b.name,
          healthy: b.healthy,
          draining: b.draining,
          inFlight: b.inFlight,
          maxConcurrency: Number.isFinite(b.maxConcurrency) ? b.maxConcurrency : null,
          weight: b.weight,
          engineRunning: b.metrics?.running ?? null,
          engineWaiting: b.metrics?.waiting ?? null,
          kvUsage: b.metrics?.kvUsage ?? null,
          requestsPerS: s?.requestsPerS ?? 0,
          errorsPerS: s?.errorsPerS ?? 0,
          tokensPerS: s?.tokensPerS ?? 0,
          uncountedPerS: s?.uncountedPerS ?? 0,
          p50LatencyMs: s?.p50LatencyMs ?? null,
          p95LatencyMs: s?.p95LatencyMs ?? null,
          estimate: mainEstimate(estimates),
          estimates,
          recentErrors: this.errorsOf(b.name, s?.recentErrors ?? []),
        };
      }),
      fleet: {
        t: fleet.t,
        completedPerS: fleet.completed,
        failedPerS: fleet.failed,
        tokensPerS: fleet.tokens,
        uncountedPerS: fleet.uncounted,
        meanLatencyMs: fleet.meanLatencyMs,
        meanTtfbMs: fleet.meanTtfbMs,
      },
      ...(withHistory ? { history: snap.fleet } : {}),
    };
  }

  /** Ends every event stream and stops the timer. */
  close(): void {
    this.closed = true;
    this.stop();
    for (const c of this.clients) c.end();
    this.clients.clear();
  }

  /** Request errors, plus the fleet's last error (a failed probe) when it is not among them. */
  private errorsOf(name: string, recent: readonly RecentError[]): readonly RecentError[] {
    const info = this.opts.backendErrors?.(name);
    if (info?.lastError === undefined) return recent;
    const at = info.lastErrorAt ?? 0;
    // Request failures reach the fleet too, under a message of their own: match on time.
    if (recent.some((e) => Math.abs(e.at - at) < 1000)) return recent;
    return [...recent, { at, message: info.lastError }].sort((a, b) => a.at - b.at).slice(-5);
  }

  private subscribe(req: IncomingMessage, res: ServerResponse): void {
    if (this.closed) return sendJson(res, 503, 'dashboard closed');
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no', // nginx: pass events through as they come
      ...SECURITY_HEADERS,
    });
    if (req.method === 'HEAD') return void res.end();
    res.write(`retry: 2000\ndata: ${JSON.stringify(this.event(true))}\n\n`);
    this.clients.add(res);
    res.on('close', () => {
      this.clients.delete(res);
      if (this.clients.size === 0) this.stop();
    });
    if (!this.timer) {
      this.timer = setInterval(() => this.broadcast(), this.intervalMs);
      this.timer.unref();
    }
  }

  /** One snapshot, serialized once, for every page. */
  private broadcast(): void {
    const frame = `data: ${JSON.stringify(this.event())}\n\n`;
    for (const c of this.clients) {
      if (c.writableLength > MAX_BUFFERED) c.destroy();
      else c.write(frame);
    }
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}

/** One number that sums up a policy's view of a backend, in seconds. */
export interface MainEstimate {
  /** `wait`: before a new request would start there; `work`: in-flight work still to do. */
  readonly kind: 'wait' | 'work';
  readonly seconds: number;
}

/**
 * The headline of a policy's `describe` record: `waitS` if a policy reports its wait estimate
 * directly; ollama-router's wait (queued characters × tokens per character × seconds per token ×
 * queue weight, the estimate it picks by); estimated-wait's work pending on the backend (a new
 * request waits for part of it only when every slot is busy). Null for policies that estimate
 * nothing (least-connections, round-robin, …) or have not timed the backend yet.
 */
export function mainEstimate(e: Readonly<Record<string, number>>): MainEstimate | null {
  if (e.waitS !== undefined) return { kind: 'wait', seconds: e.waitS };
  if (e.queueChars !== undefined && e.timePerTokenS !== undefined)
    return {
      kind: 'wait',
      seconds: e.queueChars * (e.tokenFactor ?? 1) * e.timePerTokenS * (e.queueWeight ?? 1),
    };
  if (e.pendingWorkS !== undefined) return { kind: 'work', seconds: e.pendingWorkS };
  return null;
}

function sendJson(
  res: ServerResponse,
  status: number,
  message: string,
  extra: Record<string, string> = {},
): void {
  const body = JSON.stringify({ error: message });
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    ...extra,
  });
  res.end(body);
}
