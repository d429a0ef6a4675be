import type { Logger } from 'pino';
import type { KubeConfig } from '@kubernetes/client-node';
import type { KubernetesDiscoveryConfig } from '../../config/kubernetes-discovery.js';
import { FleetSync, type DiscoveryTarget } from './fleet-sync.js';
import { kubeConfigFor } from './kube-config.js';
import { InferenceObjectiveDiscovery } from './objective-discovery.js';
import { InferencePoolDiscovery } from './pool-discovery.js';

export type { DiscoveryTarget } from './fleet-sync.js';

export interface RunningDiscovery {
  readonly sync: FleetSync;
  stop(): void;
}

/**
 * `discovery.kubernetes` in `serve` and `epp`: the InferencePool's ready pods kept in the fleet,
 * and (when the target takes them) the InferenceObjectives naming the pool as priorities. Loaded
 * with `import()` only when configured (the Kubernetes client costs seconds to load).
 * `kc`/`namespace` replace the in-cluster defaults (tests point them at a fake API server).
 */
export function startKubernetesDiscovery(
  cfg: KubernetesDiscoveryConfig,
  target: DiscoveryTarget,
  log: Logger,
  client?: { kc: KubeConfig; namespace: string; refresh?: () => void },
): RunningDiscovery {
  const { kc, namespace, refresh } = client ?? kubeConfigFor(cfg);
  const tokenTimer = refresh ? setInterval(refresh, 60_000).unref() : undefined;
  const sync = new FleetSync(target, cfg.backend, log);
  const d = new InferencePoolDiscovery(
    kc,
    { namespace, pool: cfg.inferencePool, debounceMs: cfg.debounceMs },
    (eps) => {
      sync
        .update(eps)
        .catch((err: unknown) => log.error({ err }, 'kubernetes discovery: fleet update failed'));
    },
    log,
  );
  d.start();
  const onObjectives = target.objectives?.bind(target);
  const o = onObjectives
    ? new InferenceObjectiveDiscovery(kc, { namespace, pool: cfg.inferencePool }, onObjectives, log)
    : undefined;
  o?.start();
  log.info(
    { pool: cfg.inferencePool, namespace, server: kc.getCurrentCluster()?.server },
    'kubernetes discovery started',
  );
  return {
    sync,
    stop: () => {
      if (tokenTimer) clearInterval(tokenTimer);
      d.stop();
      o?.stop();
    },
  };
}
