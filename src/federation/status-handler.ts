import type { IncomingMessage, ServerResponse } from 'node:http';
import type { PeerStatus } from './types.js';

/**
 * The peer status endpoint (GET /federation/status): what a peer's prober reads (Algorithm 1,
 * PROBELB): this router's region, how many local replicas are available, its queue length.
 * Other methods: 405 in the OpenAI error shape, nothing changed.
 */
export function handlePeerStatus(req: IncomingMessage, res: ServerResponse, status: () => PeerStatus): void {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    const body = JSON.stringify({
      error: { message: 'use GET', type: 'invalid_request_error', code: 'method_not_allowed' },
    });
    res.writeHead(405, { 'content-type': 'application/json', allow: 'GET, HEAD' }).end(body);
    return;
  }
  const body = JSON.stringify(status());
  res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(req.method === 'HEAD' ? undefined : body);
}

/** A peer's answer checked field by field (a peer is another process: trust nothing). */
export function parsePeerStatus(v: unknown): PeerStatus | undefined {
  if (v === null || typeof v !== 'object') return undefined;
  const o = v as Record<string, unknown>;
  const n = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0;
  if (typeof o.region !== 'string' || !n(o.availableReplicas) || !n(o.queueLength)) return undefined;
  return { region: o.region, availableReplicas: o.availableReplicas, queueLength: o.queueLength };
}
