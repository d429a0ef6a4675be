/**
 * `llmlb serve --workers N` (node:cluster): the primary forks N workers, each a full router on the
 * shared port (cluster's round-robin), and takes no traffic itself. What it does:
 *  - holds the shared view's book: workers' in-flight counts and cap allowances, exchanged over
 *    IPC with the same allocation as the Redis round (src/state/cluster-view.ts);
 *  - restarts a worker that dies (backoff), dropping its share of every cap at once;
 *  - forwards SIGTERM/SIGINT (graceful shutdown) and SIGHUP (config reload) to every worker;
 *  - answers /metrics for whichever worker a scrape reaches: every ready worker's registry, summed.
 */
import cluster, { type Worker } from 'node:cluster';
import {
  AggregatorRegistry,
  Counter,
  Gauge,
  Registry,
  type MetricObjectWithValues,
  type MetricValue,
} from 'prom-client';
import type { Logger } from 'pino';
import { ConfigError } from '../config/load.js';
import type { RouterSettings } from '../proxy/router.js';
import {
  ADMIN_APPLY,
  ADMIN_CHANGE,
  ANSWER,
  METRICS,
  METRICS_JSON,
  IpcChannel,
  READY,
  STATE,
  STATE_GONE,
  StateRelay,
  VIEW_GRANT,
  VIEW_ROUND,
  answerRound,
  isClusterMessage,
  workerRouterId,
  type ClusterMessage,
} from '../state/cluster-view.js';
import { SharedViewBook } from '../state/shared-view-book.js';

/**
 * State a worker would keep to itself breaks exactness across workers: in-memory quotas would be
 * limit × N. Quotas with several workers need state.redis (shared already); say so before forking.
 */
export function workersConfigProblem(s: RouterSettings, workers: number): string | undefined {
  if (workers <= 1) return undefined;
  const quotas = s.quotas ? Object.keys(s.quotas.models).length : 0;
  if (quotas > 0 && s.state === undefined)
    return `--workers ${workers} with quotas needs state.redis: in memory each worker would keep its own quota book (limits × ${workers})`;
  return undefined;
}

export function checkWorkersConfig(s: RouterSettings, workers: number, source: string): void {
  const problem = workersConfigProblem(s, workers);
  if (problem) throw new ConfigError(source, [{ path: 'quotas', message: problem }]);
}

type Json = MetricObjectWithValues<MetricValue<string>>[];

const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 5000;
/** A worker that lived this long before dying restarts after the shortest backoff again. */
const STABLE_MS = 10_000;

/** The primary's own metrics (summed with the workers' on /metrics). */
function primaryMetrics(
  ready: ReadonlySet<Worker>,
  relay: StateRelay<Worker>,
): { own: Registry; restarts: Counter } {
  const own = new Registry();
  const restarts = new Counter({
    name: 'llmlb_worker_restarts_total',
    help: 'Workers the primary restarted after they died',
    registers: [own],
  });
  new Gauge({
    name: 'llmlb_workers_ready',
    help: 'Workers serving traffic now (serve --workers N)',
    registers: [own],
    collect() {
      this.set(ready.size);
    },
  });
  new Gauge({
    name: 'llmlb_shared_state_relay_dropped',
    help: 'Shared-state batches the primary dropped for a worker whose IPC backlog was full (serve --workers N), since start',
    registers: [own],
    collect() {
      this.set(relay.stats.dropped);
    },
  });
  new Gauge({
    name: 'llmlb_shared_state_relay_backlog',
    help: 'Shared-state batches handed to workers that their IPC pipes have not taken yet (serve --workers N)',
    registers: [own],
    collect() {
      this.set(relay.backlog);
    },
  });
  return { own, restarts };
}

export async function runPrimary(workers: number, log: Logger): Promise<void> {
  const channels = new Map<Worker, IpcChannel>();
  // A hand-over goes to the worker it is for (the book names it by idOf).
  const book = new SharedViewBook((g) => {
    for (const w of channels.keys())
      if (idOf(w) === g.router && w.isConnected())
        w.send({ t: VIEW_GRANT, seq: 0, key: g.key, granted: g.granted });
  });
  const ready = new Set<Worker>();
  const bornAt = new Map<Worker, number>();
  let everReady = false;
  let banner = false;
  let firstBanner: string | undefined;
  let shuttingDown = false;
  let quickDeaths = 0;
  const idOf = (w: Worker): string => workerRouterId(w.id);
  /** Shared-state batches to each worker, bounded: a stalled worker's are dropped, not queued. */
  const relay = new StateRelay<Worker>();
  const { own, restarts } = primaryMetrics(ready, relay);
  /** Admin changes so far, replayed to each new worker (bounded: the oldest go first). */
  const adminLog: unknown[] = [];
  const ADMIN_LOG_MAX = 10_000;

  const metricsText = async (): Promise<string> => {
    const parts = await Promise.all(
      [...ready].map((w) =>
        channels
          .get(w)!
          .ask(METRICS_JSON)
          .then(
            (v) => v as Json,
            () => undefined, // a worker dying mid-scrape: the others still answer
          ),
      ),
    );
    const list = parts.filter((p): p is Json => p !== undefined);
    list.push((await own.getMetricsAsJSON()) as Json);
    return AggregatorRegistry.aggregate(list).metrics();
  };

  const fork = (): void => {
    const w = cluster.fork();
    const ch = new IpcChannel(w, 1000);
    channels.set(w, ch);
    bornAt.set(w, Date.now());
    // A message to a worker that is going away (its pipe closing while it exits) fails with an
    // 'error' event: without a listener that would end the primary. Its 'exit' handles the rest.
    w.on('error', (err: unknown) => log.debug({ worker: w.process.pid, err: String(err) }, 'worker channel'));
    w.on('message', (m: unknown) => {
      if (!isClusterMessage(m) || m.t === ANSWER) return;
      const reply = (r: ClusterMessage): void => {
        if (w.isConnected()) w.send(r);
      };
      if (m.t === VIEW_ROUND) reply(answerRound(book, idOf(w), m));
      else if (m.t === STATE) {
        // A shared-state batch: relayed as is to every other worker (sharedState).
        if (typeof m.payload === 'string')
          for (const other of ready) if (other !== w) relay.relay(other, m, m.payload.length);
      } else if (m.t === METRICS)
        metricsText().then(
          (text) => reply({ t: ANSWER, seq: m.seq, ok: true, value: text }),
          (err: unknown) => reply({ t: ANSWER, seq: m.seq, ok: false, value: String(err) }),
        );
      else if (m.t === ADMIN_CHANGE) {
        adminLog.push(m.change);
        if (adminLog.length > ADMIN_LOG_MAX) adminLog.shift();
        for (const other of ready)
          if (other !== w && other.isConnected()) other.send({ t: ADMIN_APPLY, seq: 0, change: m.change });
      } else if (m.t === READY) {
        for (const change of adminLog) reply({ t: ADMIN_APPLY, seq: 0, change });
        ready.add(w);
        everReady = true;
        if (typeof m.banner === 'string') firstBanner ??= m.banner;
        // The banner once every worker listens: cluster hands connections only to listening workers.
        if (!banner && firstBanner !== undefined && ready.size === workers) {
          banner = true;
          process.stdout.write(firstBanner);
          process.stdout.write(`workers: ${workers} (primary pid ${process.pid})\n`);
        }
      }
    });
    w.on('exit', (code, signal) => {
      ch.close();
      channels.delete(w);
      ready.delete(w);
      relay.forget(w);
      book.drop(idOf(w)); // its share of every cap returns now, not after the view's ttl
      // Its pushes leave the other workers' counts and policies now, not after sharedState's ttl.
      if (!shuttingDown)
        for (const other of ready)
          if (other.isConnected()) other.send({ t: STATE_GONE, seq: 0, router: idOf(w) });
      const lived = Date.now() - (bornAt.get(w) ?? 0);
      bornAt.delete(w);
      if (shuttingDown) return;
      if (!everReady) {
        // The first start failed (a port in use, a config the worker rejects): stop, as one process would.
        log.error({ code, signal }, 'worker failed to start; stopping');
        shutdown(typeof code === 'number' && code !== 0 ? code : 1);
        return;
      }
      quickDeaths = lived >= STABLE_MS ? 0 : quickDeaths + 1;
      const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** Math.max(0, quickDeaths - 1));
      log.warn({ worker: w.process.pid, code, signal, restartInMs: delay }, 'worker died; restarting');
      restarts.inc();
      setTimeout(() => {
        if (!shuttingDown) fork();
      }, delay);
    });
  };

  const shutdown = (code: number): void => {
    if (shuttingDown) return;
    shuttingDown = true;
    const alive = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
    for (const w of alive) w.process.kill('SIGTERM');
    const force = setTimeout(() => {
      for (const w of alive) if (!w.isDead()) w.process.kill('SIGKILL');
    }, 30_000);
    force.unref();
    Promise.all(alive.map((w) => (w.isDead() ? undefined : new Promise((r) => w.once('exit', r))))).then(
      () => process.exit(code),
      () => process.exit(code),
    );
  };

  process.once('SIGINT', () => shutdown(0));
  process.once('SIGTERM', () => shutdown(0));
  process.on('SIGHUP', () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGHUP');
  });
  for (let i = 0; i < workers; i++) fork();
  return Promise.resolve();
}
