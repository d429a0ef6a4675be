import { z } from 'zod';

/** A Kubernetes object name (RFC 1123 subdomain) or namespace (RFC 1123 label). */
const dnsSubdomain = z
  .string()
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, 'a Kubernetes object name');
const dnsLabel = z
  .string()
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'a Kubernetes namespace name');

function isHttpUrl(u: string): boolean {
  try {
    const p = new URL(u);
    return (p.protocol === 'http:' || p.protocol === 'https:') && p.hostname !== '';
  } catch {
    return false;
  }
}

/**
 * `discovery.kubernetes`: the ready pods of one InferencePool (`inference.networking.k8s.io/v1`)
 * become backends, named by pod, at `http://podIP:targetPort` (src/fleet/kubernetes/). Left out,
 * the API server, token, CA and namespace are the pod's own service account's (in-cluster).
 */
export const kubernetesDiscoverySchema = z.strictObject({
  inferencePool: dnsSubdomain,
  namespace: dnsLabel.optional(),
  apiServer: z.string().refine(isHttpUrl, 'must be an http:// or https:// URL').optional(),
  tokenFile: z.string().min(1).optional(),
  caFile: z.string().min(1).optional(),
  // Pod changes come in bursts (a rollout): the fleet is updated once they settle this long.
  debounceMs: z.number().int().min(0).max(60_000).default(250),
  // What every discovered pod is, as a `backends:` entry without name and url.
  backend: z
    .strictObject({
      api: z.enum(['ollama', 'openai']).default('openai'),
      models: z.array(z.string().min(1)).min(1).optional(),
      maxConcurrency: z.number().int().positive().optional(),
      weight: z.number().positive().default(1),
      streamUsage: z.boolean().default(true),
    })
    .prefault({}),
});

export type KubernetesDiscoveryConfig = z.output<typeof kubernetesDiscoverySchema>;
