import { z } from 'zod';

/**
 * What discovery reads from the Kubernetes API, and the pure rules that turn it into backends:
 * an InferencePool's selector and target port, and which of its pods are ready.
 */

/** The fields of an `inference.networking.k8s.io/v1` InferencePool that discovery uses. */
const inferencePoolSchema = z.object({
  metadata: z.object({ name: z.string(), deletionTimestamp: z.unknown().optional() }),
  spec: z.object({
    selector: z.object({ matchLabels: z.record(z.string(), z.string()) }),
    targetPorts: z
      .array(z.object({ number: z.number().int().min(1).max(65535) }))
      .min(1)
      .max(8),
  }),
});

export interface PoolSpec {
  readonly matchLabels: Readonly<Record<string, string>>;
  /** Each is an endpoint of its own on every pod (podIP:port), as GIE's picker treats them. */
  readonly ports: readonly number[];
}

/** The pool's selector and port; a string saying what is wrong when the object is not usable. */
export function poolSpecOf(obj: unknown): PoolSpec | string {
  const r = inferencePoolSchema.safeParse(obj);
  if (!r.success)
    return r.error.issues.map((i) => `${i.path.join('.') || '(object)'}: ${i.message}`).join('; ');
  const ports = [...new Set(r.data.spec.targetPorts.map((p) => p.number))];
  return { matchLabels: r.data.spec.selector.matchLabels, ports };
}

/** `k=v,k2=v2`, sorted, for the API's labelSelector parameter (and to compare selectors). */
export function labelSelector(matchLabels: Readonly<Record<string, string>>): string {
  return Object.keys(matchLabels)
    .sort()
    .map((k) => `${k}=${matchLabels[k]}`)
    .join(',');
}

/** The pod fields read (a V1Pod has them; typed loosely so a fake's objects fit too). */
export interface PodLike {
  readonly metadata?: {
    readonly name?: string | undefined;
    readonly labels?: Readonly<Record<string, string>> | undefined;
    readonly deletionTimestamp?: unknown;
  };
  readonly status?: {
    readonly podIP?: string | undefined;
    readonly conditions?: readonly { readonly type: string; readonly status: string }[] | undefined;
  };
}

/** Selected by the pool, Ready=True, with an IP, and not on its way out. */
export function podServes(pod: PodLike, matchLabels: Readonly<Record<string, string>>): boolean {
  const labels = pod.metadata?.labels ?? {};
  for (const k of Object.keys(matchLabels)) if (labels[k] !== matchLabels[k]) return false;
  if (pod.metadata?.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null) return false;
  if (!pod.status?.podIP || !pod.metadata?.name) return false;
  return (pod.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

/** One discovered backend: the pod's name and where it answers. */
export interface Endpoint {
  readonly name: string;
  readonly url: string;
}

/**
 * The pool's serving pods as endpoints, sorted by name: named by pod, or `pod:port` when the
 * pool has several target ports (one backend each). IPv6 addresses are bracketed.
 */
export function endpointsOf(spec: PoolSpec, pods: readonly PodLike[]): Endpoint[] {
  const out: Endpoint[] = [];
  const several = spec.ports.length > 1;
  for (const pod of pods) {
    if (!podServes(pod, spec.matchLabels)) continue;
    const ip = pod.status!.podIP!;
    const host = ip.includes(':') ? `[${ip}]` : ip;
    for (const port of spec.ports)
      out.push({
        name: several ? `${pod.metadata!.name!}:${port}` : pod.metadata!.name!,
        url: `http://${host}:${port}`,
      });
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
