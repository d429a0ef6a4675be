import { Counter, Gauge, Registry } from 'prom-client';
import { FastCounter, FastHistogram, type CounterChild, type HistogramChild } from './fast-metrics.js';
import type { Scheduler } from '../core/scheduler.js';
import type { TraceCapture } from '../trace/capture.js';

// Buckets for LLM latencies: sub-second cache hits up to multi-minute generations.
const LATENCY_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/**
 * The router's Prometheus metrics, one registry per router (tests run several in a process).
 * Gauges read the scheduler when scraped, so the request path never touches them.
 */
export class RouterMetrics {
  readonly registry = new Registry();
  // The per-request metrics skip prom-client's label hashing (see fast-metrics.ts).
  readonly requests: FastCounter;
  readonly upstreamSeconds: FastHistogram;
  readonly ttfbSeconds: FastHistogram;
  readonly retries: Counter<'backend'>;
  readonly ejections: Counter<'backend'>;
  /** Per-backend children, resolved once. */
  private readonly children = new Map<
    string,
    { upstreamSeconds: HistogramChild; ttfbSeconds: HistogramChild; byStatus: Map<number, CounterChild> }
  >();

  of(backend: string): {
    upstreamSeconds: HistogramChild;
    ttfbSeconds: HistogramChild;
    byStatus: Map<number, CounterChild>;
  } {
    let c = this.children.get(backend);
    if (!c) {
      c = {
        upstreamSeconds: this.upstreamSeconds.labels(backend),
        ttfbSeconds: this.ttfbSeconds.labels(backend),
        byStatus: new Map(),
      };
      this.children.set(backend, c);
    }
    return c;
  }

  /** One client request answered with `status` by `backend` ('none' when rejected). */
  countRequest(backend: string, status: number): void {
    const byStatus = this.of(backend).byStatus;
    let c = byStatus.get(status);
    if (!c) byStatus.set(status, (c = this.requests.labels(backend, String(status))));
    c.inc();
  }

  constructor(scheduler: () => Scheduler, capture: () => TraceCapture | undefined = () => undefined) {
    const registers = [this.registry];
    this.requests = new FastCounter(
      'llmlb_requests_total',
      'Client requests by the backend that answered (none when rejected) and status code',
      ['backend', 'status'],
      this.registry,
    );
    this.upstreamSeconds = new FastHistogram(
      'llmlb_upstream_duration_seconds',
      'Time from pushing a request to a backend to its last byte',
      ['backend'],
      LATENCY_BUCKETS,
      this.registry,
    );
    this.ttfbSeconds = new FastHistogram(
      'llmlb_upstream_ttfb_seconds',
      'Time from pushing a request to a backend to its first response byte',
      ['backend'],
      LATENCY_BUCKETS,
      this.registry,
    );
    this.retries = new Counter({
      name: 'llmlb_retries_total',
      help: 'Attempts that failed before any byte reached the client and were retried elsewhere, by failed backend',
      labelNames: ['backend'],
      registers,
    });
    this.ejections = new Counter({
      name: 'llmlb_backend_ejections_total',
      help: 'Times a backend was marked unhealthy after consecutive failures',
      labelNames: ['backend'],
      registers,
    });
    new Gauge({
      name: 'llmlb_backend_in_flight',
      help: 'Requests pushed to the backend and not finished',
      labelNames: ['backend'],
      registers,
      collect() {
        this.reset();
        for (const b of scheduler().backendViews()) this.set({ backend: b.name }, b.inFlight);
      },
    });
    new Gauge({
      name: 'llmlb_backend_healthy',
      help: '1 when the backend takes requests (healthy and not draining)',
      labelNames: ['backend'],
      registers,
      collect() {
        this.reset();
        for (const b of scheduler().backendViews())
          this.set({ backend: b.name }, b.healthy && !b.draining ? 1 : 0);
      },
    });
    new Counter({
      name: 'llmlb_trace_lines_total',
      help: 'Trace capture lines (trace: in the config) by outcome: recorded, written to disk, dropped (disk behind or failing)',
      labelNames: ['outcome'],
      registers,
      collect() {
        const c = capture();
        this.reset();
        if (!c) return;
        this.inc({ outcome: 'recorded' }, c.recorded);
        this.inc({ outcome: 'written' }, c.written);
        this.inc({ outcome: 'dropped' }, c.dropped);
      },
    });
    new Gauge({
      name: 'llmlb_router_queue_length',
      help: 'Requests waiting in the router queue',
      registers,
      collect() {
        this.set(scheduler().queueLength);
      },
    });
    new Gauge({
      name: 'llmlb_backend_estimate',
      help: "The routing policy's per-backend estimates (e.g. time per token, estimated wait)",
      labelNames: ['backend', 'estimate'],
      registers,
      collect() {
        this.reset();
        const s = scheduler();
        for (const b of s.backendViews()) {
          for (const [k, v] of Object.entries(s.describe(b.name))) {
            if (Number.isFinite(v)) this.set({ backend: b.name, estimate: k }, v);
          }
        }
      },
    });
  }
}
