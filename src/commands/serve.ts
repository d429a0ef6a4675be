import cluster from 'node:cluster';
import { watch } from 'node:fs';
import type { Logger } from 'pino';
import { applyOverrides, loadConfigFile, parseBackendEntry } from '../config/load.js';
import { endpointPickerWarnings } from '../core/policies/framework/endpoint-picker-config.js';
import { createLogger } from '../log.js';
import type { KubernetesDiscoveryConfig } from '../config/kubernetes-discovery.js';
import type { RunningDiscovery } from '../fleet/kubernetes/index.js';
import { Router, type RouterHostOptions, type RouterSettings } from '../proxy/router.js';
import { applyAdminChange, isAdminChange } from '../proxy/admin-broadcast.js';
import {
  ADMIN_APPLY,
  ADMIN_CHANGE,
  IpcChannel,
  isClusterMessage,
  METRICS,
  METRICS_JSON,
  READY,
  answerPrimary,
  clusterViewTransport,
  clusterStateTransport,
  workerRouterId,
} from '../state/cluster-view.js';
import { checkWorkersConfig, runPrimary, workersConfigProblem } from './serve-workers.js';
import { policyCheck } from './policy-check.js';
import { portError } from './port-error.js';

/** Load, validate (once) and apply overrides; throws ConfigError naming the field. */
export function loadRouterConfig(path: string, cli: { host?: string; port?: number }): RouterSettings {
  return applyOverrides(loadConfigFile(path, policyCheck), process.env, cli, policyCheck);
}

export function policyValidation(): typeof policyCheck {
  return policyCheck;
}

/**
 * Hot reload: on SIGHUP or a change to the file, validate the new config and apply it; an
 * invalid one is logged and the running config stays.
 */
export function watchConfig(
  path: string,
  cli: { host?: string; port?: number },
  router: Router,
  log: Logger,
  /** A reason to refuse a config this process can't run (`--workers N`: quotas in memory). */
  refuse: (next: RouterSettings) => string | undefined = () => undefined,
): () => void {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const reload = (why: string): void => {
    running = running.then(async () => {
      let next: RouterSettings;
      try {
        next = loadRouterConfig(path, cli);
      } catch (err) {
        log.error(
          { reason: (err as Error).message, trigger: why },
          'config reload rejected; keeping the running config',
        );
        return;
      }
      const refused = refuse(next);
      if (refused !== undefined) {
        log.error({ reason: refused, trigger: why }, 'config reload rejected; keeping the running config');
        return;
      }
      try {
        const changes = await router.reconfigure(next);
        log.info({ trigger: why, changes }, 'config reloaded');
      } catch (err) {
        log.error({ err, trigger: why }, 'config reload failed');
      }
    });
  };
  const onHup = (): void => reload('SIGHUP');
  process.on('SIGHUP', onHup);
  // Editors replace files (rename) or write in bursts: debounce, and re-arm after a rename.
  let watcher = watch(path);
  const arm = (): void => {
    watcher.on('change', (event) => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => reload('file change'), 150);
      if (event === 'rename') {
        watcher.close();
        setTimeout(() => {
          try {
            watcher = watch(path);
            arm();
          } catch {
            log.warn({ path }, 'config file vanished; watching stopped (SIGHUP still reloads)');
          }
        }, 100);
      }
    });
    watcher.on('error', () => undefined);
  };
  arm();
  return () => {
    process.off('SIGHUP', onHup);
    if (timer) clearTimeout(timer);
    watcher.close();
  };
}

/**
 * `discovery.kubernetes`: the InferencePool's ready pods join the fleet as backends (marked
 * discovered: hot reload leaves them to discovery) and leave through the admin API's remove;
 * the InferenceObjectives naming the pool feed the router queue's priorities.
 * The Kubernetes client is loaded only here.
 */
export async function startDiscovery(
  cfg: KubernetesDiscoveryConfig,
  router: Router,
  log: Logger,
): Promise<RunningDiscovery> {
  const { startKubernetesDiscovery } = await import('../fleet/kubernetes/index.js');
  return startKubernetesDiscovery(
    cfg,
    {
      add: (entry) => router.fleet.add(entry, 'discovery'),
      remove: (name) => router.adminOps.removeBackend(name),
      objectives: (table) => router.objectives.setDiscovered(table),
    },
    log,
  );
}

export async function runServe(o: {
  config: string;
  host?: string;
  port?: number;
  /** `--workers N` (node:cluster); 1 = this process serves (the default). */
  workers?: number;
}): Promise<void> {
  const settings = loadRouterConfig(o.config, o);
  const workers = o.workers ?? 1;
  checkWorkersConfig(settings, workers, o.config);
  const log = createLogger(settings.log.level);
  if (workers > 1 && cluster.isPrimary) return runPrimary(workers, log);
  const isWorker = workers > 1 && cluster.isWorker;
  // llm-d's renamed plugin types still load (llm-d-compat.ts); say which to rename.
  if (settings.scheduling && (!isWorker || cluster.worker?.id === 1))
    for (const w of endpointPickerWarnings(settings.scheduling)) log.warn(`scheduling.${w}`);
  let hostOpts: RouterHostOptions = {};
  let channel: IpcChannel | undefined;
  if (isWorker) {
    channel = new IpcChannel(process, 1000);
    const ch = channel;
    hostOpts = {
      viewTransport: clusterViewTransport(
        ch,
        process,
        cluster.worker ? workerRouterId(cluster.worker.id) : undefined,
      ),
      stateTransport: clusterStateTransport(process),
      ...(cluster.worker ? { stateRouterId: workerRouterId(cluster.worker.id) } : {}),
      adminBroadcast: (change) => process.send?.({ t: ADMIN_CHANGE, seq: 0, change }),
      metricsText: async () => {
        const text = await ch.ask(METRICS, {}, 3000);
        if (typeof text !== 'string') throw new Error('malformed metrics answer from the primary');
        return text;
      },
    };
  }
  const router = new Router(settings, log, Math.random, parseBackendEntry, hostOpts);
  if (isWorker) {
    answerPrimary(process, new Map([[METRICS_JSON, () => router.metrics.registry.getMetricsAsJSON()]]));
    // Admin changes made on another worker (or before this one started), applied here in order.
    let applying: Promise<void> = Promise.resolve();
    process.on('message', (m: unknown) => {
      if (!isClusterMessage(m) || m.t !== ADMIN_APPLY || !isAdminChange(m.change)) return;
      const change = m.change;
      applying = applying.then(() =>
        applyAdminChange(router.adminOps, change).catch((err: unknown) =>
          log.warn({ err, op: change.op }, 'admin change from another worker not applied here'),
        ),
      );
    });
  }
  let url: string;
  try {
    url = await router.listen(settings.server.host, settings.server.port);
  } catch (err) {
    throw portError(err, (p) =>
      p === settings.server.port || p === undefined
        ? 'choose another with --port (or server.port in the config)'
        : 'choose another with admin.listen in the config',
    );
  }
  // The address only: a token set in the config is never echoed (logs get collected).
  const banner =
    `llmlb listening on ${url}\n` +
    `dashboard: ${url}/dashboard\n` +
    (router.adminUrl === undefined
      ? 'admin API closed (set admin.token or admin.listen to open it)\n'
      : `admin API on ${router.adminUrl}/admin${settings.admin?.token === undefined ? '' : ' (bearer token)'}\n`);
  // Workers tell the primary, which prints the banner once.
  if (isWorker) process.send?.({ t: READY, seq: 0, banner });
  else process.stdout.write(banner);
  const k8s = settings.discovery.kubernetes;
  const discovery = k8s ? await startDiscovery(k8s, router, log) : undefined;
  // Every worker watches the file and reloads itself; SIGHUP to the primary reaches each.
  const unwatch = watchConfig(o.config, o, router, log, (next) => workersConfigProblem(next, workers));
  const stop = (): void => {
    unwatch();
    discovery?.stop();
    channel?.close();
    router.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
