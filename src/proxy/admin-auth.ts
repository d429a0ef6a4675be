import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import type { AdminSettings } from '../config/schema.js';
import { sendError } from '../http/errors.js';

/**
 * Who may use /admin (docs/security.md). Closed by default: with neither `admin.token` nor
 * `admin.listen`, every admin route answers 403 saying how to open it.
 */

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

/** Constant-time: both sides are hashed first, so neither length nor content leaks through timing. */
export function tokenEquals(given: string, token: string): boolean {
  return timingSafeEqual(digest(given), digest(token));
}

/** `Authorization: Bearer <token>`, the scheme in any case (RFC 7235 §2.1). */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const m = header === undefined ? null : /^\s*bearer\s+(\S+)\s*$/i.exec(header);
  return m !== null && tokenEquals(m[1]!, token);
}

/** 127.0.0.0/8, ::1 and localhost: reachable from this machine only. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h) || h === '::ffff:127.0.0.1';
}

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * A browser's cross-site request (CSRF): modern browsers send Sec-Fetch-Site, all send Origin
 * on a cross-origin POST. curl and other non-browser clients send neither.
 */
function crossSite(req: IncomingMessage): boolean {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return true;
  const origin = req.headers.origin;
  if (origin === undefined) return false;
  try {
    return new URL(origin).host !== req.headers.host;
  } catch {
    return true; // "null" (sandboxed pages, file://) and anything unparsable
  }
}

/**
 * A Host header a DNS-rebinding page cannot produce: an IP literal or localhost. Only needed
 * where no token guards the routes (a tokenless admin listener).
 */
function literalHost(host: string | undefined): boolean {
  if (host === undefined) return false;
  const name = /^\[([^\]]+)\](?::\d+)?$/.exec(host)?.[1] ?? host.replace(/:\d+$/, '');
  return isIP(name) !== 0 || name.toLowerCase() === 'localhost';
}

/**
 * Whether this /admin request may proceed; otherwise sends the refusal (OpenAI error shape) and
 * returns false. `onAdminListener`: the request came in on `admin.listen`'s server.
 */
export function admitAdmin(
  req: IncomingMessage,
  res: ServerResponse,
  admin: AdminSettings | undefined,
  onAdminListener: boolean,
): boolean {
  const token = admin?.token;
  const refuse = (status: number, message: string, code: string, headers?: Record<string, string>): false => {
    sendError(res, 'openai', status, message, code, headers);
    return false;
  };
  if (admin?.listen !== undefined && !onAdminListener)
    return refuse(
      403,
      'the admin API is served on its own listener (admin.listen), not on this port',
      'admin_elsewhere',
    );
  if (admin?.listen === undefined && token === undefined)
    return refuse(
      403,
      'the admin API is closed: set admin.token in the config (or LLMLB_ADMIN_TOKEN) and send ' +
        "'Authorization: Bearer <token>', or set admin.listen to serve it on a separate loopback address",
      'admin_closed',
    );
  if (token !== undefined && !bearerMatches(req.headers.authorization, token))
    return refuse(401, 'missing or wrong bearer token', 'unauthorized', { 'www-authenticate': 'Bearer' });
  if (STATE_CHANGING.has(req.method ?? 'GET') && crossSite(req))
    return refuse(403, 'cross-site admin requests are refused', 'cross_site');
  if (token === undefined && !literalHost(req.headers.host))
    return refuse(403, 'without admin.token the Host header must be an IP address or localhost', 'bad_host');
  return true;
}

/**
 * The dashboard's event stream lists backends and their errors: when a token is set it needs
 * the token too, as a bearer header or `?token=` (EventSource cannot set headers).
 */
export function dashboardAllowed(req: IncomingMessage, admin: AdminSettings | undefined): boolean {
  const token = admin?.token;
  if (token === undefined) return true;
  if (bearerMatches(req.headers.authorization, token)) return true;
  const url = req.url ?? '';
  const q = url.indexOf('?');
  const given = q >= 0 ? new URLSearchParams(url.slice(q + 1)).get('token') : null;
  return given !== null && tokenEquals(given, token);
}

/** A JSON body's content type (`application/json`, parameters allowed); 415 is sent otherwise. */
