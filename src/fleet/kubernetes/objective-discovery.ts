import {
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { INFERENCE_POOL_GROUP } from './pool-discovery.js';
import { Informer } from './informer.js';

/** The InferenceObjective API this discovery reads (llm-d's). */
export const INFERENCE_OBJECTIVE_GROUP = 'llm-d.ai';
export const INFERENCE_OBJECTIVE_VERSION = 'v1alpha2';

export interface ObjectiveDiscoveryOptions {
  readonly namespace: string;
  /** The InferencePool whose objectives count (spec.poolRef.name). */
  readonly pool: string;
  readonly backoffMs?: number;
  readonly maxBackoffMs?: number;
}

/**
 * The priority an InferenceObjective gives the pool `pool`, or undefined when it is for another
 * pool (spec.poolRef: name, group defaulting to the GIE group, kind to InferencePool) or is not
 * an objective at all. spec.priority absent is 0; one that is not an integer makes the object unusable.
 */
export function objectivePriorityOf(o: KubernetesObject, pool: string): number | undefined {
  const spec = (o as { spec?: unknown }).spec;
  if (typeof spec !== 'object' || spec === null) return undefined;
  const { poolRef, priority } = spec as { poolRef?: unknown; priority?: unknown };
  if (typeof poolRef !== 'object' || poolRef === null) return undefined;
  const ref = poolRef as { name?: unknown; group?: unknown; kind?: unknown };
  if (ref.name !== pool) return undefined;
  if (ref.group !== undefined && ref.group !== '' && ref.group !== INFERENCE_POOL_GROUP) return undefined;
  if (ref.kind !== undefined && ref.kind !== '' && ref.kind !== 'InferencePool') return undefined;
  if (priority === undefined || priority === null) return 0;
  return typeof priority === 'number' && Number.isSafeInteger(priority) ? priority : undefined;
}

/**
 * The InferenceObjectives (`llm-d.ai/v1alpha2`) in the pool's namespace that name this pool,
 * watched: each settled list or change hands `onObjectives` the whole table (objective name, the
 * value the `x-gateway-inference-objective` header carries → priority) when it differs from the
 * last one. Nothing is passed on before the first list; a failed list or watch keeps the last
 * table (the informer starts again after a backoff; 410 Gone re-lists).
 */
export class InferenceObjectiveDiscovery {
  private readonly informer: Informer<KubernetesObject>;
  private last: string | undefined;
  private stopped = false;

  constructor(
    kc: KubeConfig,
    private readonly opts: ObjectiveDiscoveryOptions,
    private readonly onObjectives: (table: ReadonlyMap<string, number>) => void,
    private readonly log: Logger,
  ) {
    const custom = kc.makeApiClient(CustomObjectsApi);
    const ns = opts.namespace;
    this.informer = new Informer<KubernetesObject>(
      kc,
      `/apis/${INFERENCE_OBJECTIVE_GROUP}/${INFERENCE_OBJECTIVE_VERSION}/namespaces/${ns}/inferenceobjectives`,
      async () =>
        (await custom.listNamespacedCustomObject({
          group: INFERENCE_OBJECTIVE_GROUP,
          version: INFERENCE_OBJECTIVE_VERSION,
          namespace: ns,
          plural: 'inferenceobjectives',
        })) as KubernetesListObject<KubernetesObject>,
      {},
      () => this.changed(),
      (err, retryMs) => {
        const e = err as { statusCode?: number; code?: number; message?: string } | undefined;
        this.log.warn(
          { pool: opts.pool, status: e?.statusCode ?? e?.code, reason: e?.message, retryMs },
          'kubernetes discovery: inferenceobjectives list/watch failed; retrying',
        );
      },
      { base: opts.backoffMs ?? 500, max: opts.maxBackoffMs ?? 30_000 },
    );
  }

  start(): void {
    this.informer.start();
  }

  stop(): void {
    this.stopped = true;
    this.informer.stop();
  }

  private changed(): void {
    if (this.stopped || !this.informer.synced) return;
    const table = new Map<string, number>();
    for (const o of this.informer.lw.list(this.opts.namespace)) {
      const name = o.metadata?.name;
      const p = name === undefined ? undefined : objectivePriorityOf(o, this.opts.pool);
      if (name !== undefined && p !== undefined) table.set(name, p);
    }
    const sorted = [...table].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const key = JSON.stringify(sorted);
    if (key === this.last) return;
    this.last = key;
    this.log.info(
      { pool: this.opts.pool, objectives: Object.fromEntries(sorted) },
      'InferenceObjective priorities',
    );
    this.onObjectives(new Map(sorted));
  }
}
