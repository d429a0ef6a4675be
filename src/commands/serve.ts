import { watch } from 'node:fs';
import type { Logger } from 'pino';
import { applyOverrides, loadConfigFile, parseBackendEntry } from '../config/load.js';
import { endpointPickerWarnings } from '../core/policies/endpoint-picker-config.js';
import { createLogger } from '../log.js';
import type { KubernetesDiscoveryConfig } from '../config/kubernetes-discovery.js';
import type { RunningDiscovery } from '../fleet/kubernetes/index.js';
import { Router, type RouterSettings } from '../proxy/router.js';
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
 * discovered: hot reload leaves them to discovery) and leave through the admin API's remove.
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
    },
    log,
  );
}

export async function runServe(o: { config: string; host?: string; port?: number }): Promise<void> {
  const settings = loadRouterConfig(o.config, o);
  const log = createLogger(settings.log.level);
  // llm-d's renamed plugin types still load (llm-d-compat.ts); say which to rename.
  if (settings.scheduling)
    for (const w of endpointPickerWarnings(settings.scheduling)) log.warn(`scheduling.${w}`);
  const router = new Router(settings, log, Math.random, parseBackendEntry);
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
  process.stdout.write(`llmlb listening on ${url}\n`);
  // The address only: a token set in the config is never echoed (logs get collected).
  process.stdout.write(`dashboard: ${url}/dashboard\n`);
  process.stdout.write(
    router.adminUrl === undefined
      ? 'admin API closed (set admin.token or admin.listen to open it)\n'
      : `admin API on ${router.adminUrl}/admin${settings.admin?.token === undefined ? '' : ' (bearer token)'}\n`,
  );
  const k8s = settings.discovery.kubernetes;
  const discovery = k8s ? await startDiscovery(k8s, router, log) : undefined;
  const unwatch = watchConfig(o.config, o, router, log);
  const stop = (): void => {
    unwatch();
    discovery?.stop();
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
