import { createLogger } from '../log.js';
import { parseBackendEntry } from '../config/load.js';
import { Router } from '../proxy/router.js';
import { EppServer } from '../epp/server.js';
import { endpointPickerWarnings } from '../core/policies/framework/endpoint-picker-config.js';
import { loadRouterConfig, startDiscovery, watchConfig } from './serve.js';
import { portError } from './port-error.js';

/**
 * `llmlb epp --config FILE`: the Gateway API endpoint picker. The router core is `serve`'s (same
 * policy, queue, quotas, fleet probes; /metrics and the ops routes on `server.port`); the gateway
 * asks it over Envoy's ext_proc v3 on `epp.port`; grpc.health.v1 answers on `epp.healthPort` too.
 */
export async function runEpp(o: { config: string; host?: string; port?: number }): Promise<void> {
  const settings = loadRouterConfig(o.config, o);
  const log = createLogger(settings.log.level);
  if (settings.scheduling)
    for (const w of endpointPickerWarnings(settings.scheduling)) log.warn(`scheduling.${w}`);
  const router = new Router(settings, log, Math.random, parseBackendEntry);
  const epp = settings.epp ?? { port: 9002, healthPort: 9003, fallbacks: 2 };
  const picker = new EppServer(router, {
    host: epp.host ?? settings.server.host,
    port: epp.port,
    healthPort: epp.healthPort,
    fallbacks: epp.fallbacks,
  });
  let url: string;
  try {
    url = await router.listen(settings.server.host, settings.server.port);
  } catch (err) {
    throw portError(err, () => 'choose another with --port (or server.port in the config)');
  }
  try {
    await picker.listen();
  } catch (err) {
    await router.close();
    const e = err as Error;
    throw portError(
      Object.assign(e, { code: /in use/i.test(e.message) ? 'EADDRINUSE' : undefined }),
      () => 'choose another with epp.port / epp.healthPort in the config',
    );
  }
  const h = epp.host ?? settings.server.host;
  process.stdout.write(`llmlb epp listening on grpc://${h}:${picker.port} (ext_proc v3)\n`);
  process.stdout.write(`health: grpc://${h}:${picker.healthPort} (grpc.health.v1)\n`);
  process.stdout.write(`metrics: ${url}/metrics\n`);
  // An InferencePool's ready pods, as in serve: the picker's usual fleet in Kubernetes.
  const k8s = settings.discovery.kubernetes;
  const discovery = k8s ? await startDiscovery(k8s, router, log) : undefined;
  const unwatch = watchConfig(o.config, o, router, log);
  const stop = (): void => {
    unwatch();
    discovery?.stop();
    picker
      .close()
      .then(() => router.close())
      .then(
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
