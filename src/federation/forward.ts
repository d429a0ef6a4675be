import type { ServerResponse } from 'node:http';
import { request, type Dispatcher } from 'undici';
import { HOP_HEADER } from './types.js';

export interface ForwardOptions {
  /** The peer router's base URL. */
  readonly url: string;
  readonly method: string;
  /** Same path as the client asked (the peer speaks the same API). */
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  readonly res: ServerResponse;
  readonly signal?: AbortSignal;
  readonly dispatcher?: Dispatcher;
  /** Connect + first byte timeout (ms). */
  readonly headersTimeoutMs?: number;
}

/**
 * - `done`: the peer's answer went out in full;
 * - `failed-before-bytes`: nothing was written to the client (peer down, refused, 5xx): retry locally;
 * - `failed-mid-stream`: bytes had gone out when the peer broke: the client's answer is cut.
 */
export type ForwardOutcome = 'done' | 'failed-before-bytes' | 'failed-mid-stream';

// Per-hop headers (RFC 9110 §7.6.1) and the ones the body or undici sets itself.
const DROP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'host',
  'content-length',
]);

/**
 * Forward a request to a peer router with the hop marker (so the peer never forwards it again) and
 * stream its answer back as it comes.
 */
export async function forwardToPeer(o: ForwardOptions): Promise<ForwardOutcome> {
  const headers: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [k, v] of Object.entries(o.headers)) if (!DROP.has(k.toLowerCase())) headers[k] = v;
  headers[HOP_HEADER] = '1';
  let wrote = false;
  try {
    const r = await request(new URL(o.path, o.url), {
      method: o.method as Dispatcher.HttpMethod,
      headers,
      body: o.body,
      signal: o.signal,
      dispatcher: o.dispatcher,
      headersTimeout: o.headersTimeoutMs ?? 30_000,
    });
    if (r.statusCode >= 500) {
      await r.body.dump();
      return 'failed-before-bytes';
    }
    const out = Object.create(null) as Record<string, string | string[]>; // peer-chosen names
    for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !DROP.has(k)) out[k] = v;
    o.res.writeHead(r.statusCode, out);
    wrote = true;
    for await (const chunk of r.body) {
      if (o.res.destroyed) throw new Error('client left');
      if (!o.res.write(chunk as Buffer))
        await new Promise<void>((ok) => {
          o.res.once('drain', ok);
          o.res.once('close', ok);
        });
    }
    o.res.end();
    return 'done';
  } catch {
    if (!wrote) return 'failed-before-bytes';
    o.res.destroy();
    return 'failed-mid-stream';
  }
}
