import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type V1Pod,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { endpointsOf, labelSelector, poolSpecOf, type Endpoint, type PoolSpec } from './endpoints.js';
import { Informer } from './informer.js';

/** The InferencePool API this discovery reads (GIE v1). */
export const INFERENCE_POOL_GROUP = 'inference.networking.k8s.io';
export const INFERENCE_POOL_VERSION = 'v1';

export interface PoolDiscoveryOptions {
  readonly namespace: string;
  readonly pool: string;
  /** Changes are passed on once they settle this long (a rollout moves many pods at once). */
  readonly debounceMs: number;
  /** First retry after a failed list or watch; doubled per failure in a row up to maxBackoffMs. */
  readonly backoffMs?: number;
  readonly maxBackoffMs?: number;
}

/**
 * The ready pods of one InferencePool (`inference.networking.k8s.io/v1`), kept current through
 * the Kubernetes API: the pool is watched for its selector and target port, the pods it selects
 * are watched for readiness, and every settled change is handed to `onEndpoints` as the full
 * list (pod name, `http://podIP:port`). A changed selector starts a fresh pod watch; a pool
 * that is deleted (or unusable) leaves no endpoints. Nothing is passed on before the first lists.
 */
export class InferencePoolDiscovery {
  private readonly pools: Informer<KubernetesObject>;
  private pods: Informer<V1Pod> | undefined;
  private spec: PoolSpec | undefined;
  private selector: string | undefined;
  private problem: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private last: string | undefined;
  private stopped = false;
  private readonly core: CoreV1Api;
  private readonly backoff: { base: number; max: number };

  constructor(
    private readonly kc: KubeConfig,
    private readonly opts: PoolDiscoveryOptions,
    private readonly onEndpoints: (eps: Endpoint[]) => void,
    private readonly log: Logger,
  ) {
    this.core = kc.makeApiClient(CoreV1Api);
    this.backoff = { base: opts.backoffMs ?? 500, max: opts.maxBackoffMs ?? 30_000 };
    const custom = kc.makeApiClient(CustomObjectsApi);
    const ns = opts.namespace;
    const field = `metadata.name=${opts.pool}`;
    this.pools = new Informer<KubernetesObject>(
      kc,
      `/apis/${INFERENCE_POOL_GROUP}/${INFERENCE_POOL_VERSION}/namespaces/${ns}/inferencepools`,
      async () =>
        (await custom.listNamespacedCustomObject({
          group: INFERENCE_POOL_GROUP,
          version: INFERENCE_POOL_VERSION,
          namespace: ns,
          plural: 'inferencepools',
          fieldSelector: field,
        })) as KubernetesListObject<KubernetesObject>,
      { field },
      () => this.poolChanged(),
      (err, ms) => this.failed('inferencepools', err, ms),
      this.backoff,
    );
  }

  start(): void {
    this.pools.start();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.pools.stop();
    this.pods?.stop();
  }

  private failed(what: string, err: unknown, retryMs: number): void {
    const e = err as { statusCode?: number; code?: number; message?: string } | undefined;
    this.log.warn(
      { pool: this.opts.pool, status: e?.statusCode ?? e?.code, reason: e?.message, retryMs },
      `kubernetes discovery: ${what} list/watch failed; retrying`,
    );
  }

  private poolChanged(): void {
    if (this.stopped || !this.pools.synced) return;
    const obj = this.pools.lw.get(this.opts.pool, this.opts.namespace);
    const spec = obj === undefined ? 'not found' : poolSpecOf(obj);
    if (typeof spec === 'string') {
      if (spec !== this.problem)
        this.log.warn(
          { pool: this.opts.pool, namespace: this.opts.namespace, problem: spec },
          'InferencePool unusable: no endpoints',
        );
      this.problem = spec;
      this.spec = undefined;
      this.selector = undefined;
      this.pods?.stop();
      this.pods = undefined;
      this.schedule();
      return;
    }
    this.problem = undefined;
    this.spec = spec;
    const sel = labelSelector(spec.matchLabels);
    if (sel !== this.selector) {
      // A new selector: watch the pods it selects (the old watch's pods stop counting).
      this.selector = sel;
      this.pods?.stop();
      const ns = this.opts.namespace;
      this.pods = new Informer<V1Pod>(
        this.kc,
        `/api/v1/namespaces/${ns}/pods`,
        () => this.core.listNamespacedPod({ namespace: ns, labelSelector: sel }),
        { label: sel },
        () => this.schedule(),
        (err, ms) => this.failed('pods', err, ms),
        this.backoff,
      );
      this.pods.start();
      this.log.info({ pool: this.opts.pool, selector: sel, ports: spec.ports }, 'InferencePool selector');
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.emit();
    }, this.opts.debounceMs);
  }

  private emit(): void {
    if (this.stopped || !this.pools.synced) return;
    let eps: Endpoint[];
    if (!this.spec) eps = [];
    else if (!this.pods?.synced)
      return; // the pod list for this selector is not in yet
    else eps = endpointsOf(this.spec, this.pods.lw.list(this.opts.namespace));
    const key = JSON.stringify(eps);
    if (key === this.last) return;
    this.last = key;
    this.onEndpoints(eps);
  }
}
