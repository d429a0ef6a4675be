import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { BackendView } from '../core/types.js';
import type { LiveStats } from './live-stats.js';

/** What the dashboard reads from the router. */
export interface DashboardSource {
  readonly policyName: string;
  readonly queueLength: number;
  backendViews(): readonly BackendView[];
  describe(name: string): Readonly<Record<string, number>>;
}

const require = createRequire(import.meta.url);
const here = new URL('.', import.meta.url);

/** Assets are read once, at the first request, from the package itself: no CDN. */
let assets: Map<string, { type: string; body: Buffer }> | undefined;
function loadAssets(): Map<string, { type: string; body: Buffer }> {
  assets ??= new Map([
    ['/dashboard', { type: 'text/html; charset=utf-8', body: readFileSync(new URL('page.html', here)) }],
    [
      '/dashboard/app.js',
      { type: 'text/javascript; charset=utf-8', body: readFileSync(new URL('app.js', here)) },
    ],
    [
      '/dashboard/uplot.js',
      {
        type: 'text/javascript; charset=utf-8',
        body: readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js')),
      },
    ],
    [
      '/dashboard/uplot.css',
      { type: 'text/css; charset=utf-8', body: readFileSync(require.resolve('uplot/dist/uPlot.min.css')) },
    ],
  ]);
  return assets;
}

/**
 * GET /dashboard (page and assets) and /dashboard/events (server-sent events, one snapshot a
 * second). One timer serves every connected page; it stops when the last one leaves.
 */
export class Dashboard {
  private readonly clients = new Set<ServerResponse>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly source: DashboardSource,
    private readonly stats: LiveStats,
  ) {}

  /** Serve the request if it is the dashboard's; false otherwise. */
  handle(req: IncomingMessage, res: ServerResponse, path: string): boolean {
    if (path !== '/dashboard' && !path.startsWith('/dashboard/')) return false;
    if (req.method !== 'GET') {
      res.writeHead(405, { allow: 'GET', 'content-type': 'application/json' });
      res.end('{"error":"method not allowed; use GET"}');
      return true;
    }
    if (path === '/dashboard/events') {
      this.subscribe(req, res);
      return true;
    }
    const asset = loadAssets().get(path === '/dashboard/' ? '/dashboard' : path);
    if (!asset) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":"not found"}');
      return true;
    }
    res.writeHead(200, {
      'content-type': asset.type,
      'content-length': asset.body.length,
      'cache-control': 'no-cache',
    });
    res.end(asset.body);
    return true;
  }

  /** The snapshot a page receives each second. */
  snapshot(now = Date.now()): unknown {
    return {
      t: now,
      policy: this.source.policyName,
      queued: this.source.queueLength,
      backends: this.source.backendViews().map((b) => {
        const r = this.stats.backend(b.name, now);
        return {
          name: b.name,
          healthy: b.healthy,
          draining: b.draining,
          inFlight: b.inFlight,
          maxConcurrency: Number.isFinite(b.maxConcurrency) ? b.maxConcurrency : null,
          engineWaiting: b.metrics?.waiting ?? null,
          engineRunning: b.metrics?.running ?? null,
          kvUsage: b.metrics?.kvUsage ?? null,
          requestsPerS: r.requestsPerS,
          tokensPerS: r.tokensPerS,
          meanLatencyMs: r.meanLatencyMs,
          estimates: this.source.describe(b.name),
          recentErrors: r.recentErrors,
        };
      }),
      fleet: this.stats.fleet(now),
    };
  }

  private subscribe(req: IncomingMessage, res: ServerResponse): void {
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    res.write(`data: ${JSON.stringify(this.snapshot())}\n\n`);
    this.clients.add(res);
    req.on('close', () => {
      this.clients.delete(res);
      if (this.clients.size === 0) this.stop();
    });
    this.timer ??= setInterval(() => this.broadcast(), 1000);
  }

  private broadcast(): void {
    const line = `data: ${JSON.stringify(this.snapshot())}\n\n`;
    for (const c of this.clients) c.write(line);
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  close(): void {
    this.stop();
    for (const c of this.clients) c.end();
    this.clients.clear();
  }
}
