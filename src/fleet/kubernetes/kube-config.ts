import { existsSync, readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { KubeConfig, type User } from '@kubernetes/client-node';
import type { KubernetesDiscoveryConfig } from '../../config/kubernetes-discovery.js';

/** Where a pod finds its service account (the kubelet mounts it). */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * The client's KubeConfig for `discovery.kubernetes`: the settings given, else the pod's own
 * (in-cluster: KUBERNETES_SERVICE_HOST/PORT, the service account's token, CA and namespace).
 * `refresh` re-reads the token (bound tokens rotate hourly; call it every minute). Throws when no
 * API server can be named or the token file cannot be read.
 */
export function kubeConfigFor(
  c: KubernetesDiscoveryConfig,
  env: Readonly<Record<string, string | undefined>> = process.env,
  saDir = SERVICE_ACCOUNT_DIR,
): { kc: KubeConfig; namespace: string; refresh: () => void } {
  let server = c.apiServer;
  if (server === undefined) {
    const host = env.KUBERNETES_SERVICE_HOST;
    const port = env.KUBERNETES_SERVICE_PORT ?? '443';
    if (!host)
      throw new Error(
        'discovery.kubernetes: set apiServer, or run in a pod (KUBERNETES_SERVICE_HOST is not set)',
      );
    server = `https://${isIPv6(host) ? `[${host}]` : host}:${port}`;
  }
  const tokenFile = c.tokenFile ?? (existsSync(`${saDir}/token`) ? `${saDir}/token` : undefined);
  const caFile = c.caFile ?? (existsSync(`${saDir}/ca.crt`) ? `${saDir}/ca.crt` : undefined);
  const cluster = {
    name: 'llmlb',
    server: server.replace(/\/+$/, ''),
    // The client refuses plain http unless told to skip TLS checks: there are none to skip.
    skipTLSVerify: server.startsWith('http://'),
    ...(caFile ? { caFile } : {}),
  };
  // The token is read here, trimmed (the client's own token-file reader sends a trailing newline
  // along, which no HTTP header may carry), and again on refresh() as the kubelet rotates it.
  const user = (): User => {
    if (tokenFile === undefined) return { name: 'llmlb' };
    return { name: 'llmlb', token: readFileSync(tokenFile, 'utf8').trim() };
  };
  const kc = new KubeConfig();
  kc.loadFromClusterAndUser(cluster, user());
  const refresh = (): void => {
    try {
      kc.loadFromClusterAndUser(cluster, user());
    } catch {
      // Unreadable for a moment (being replaced): the token in hand stays until the next try.
    }
  };
  const nsFile = `${saDir}/namespace`;
  const namespace =
    c.namespace ?? (existsSync(nsFile) ? readFileSync(nsFile, 'utf8').trim() : undefined) ?? 'default';
  return { kc, namespace, refresh };
}
