import type { IncomingMessage, ServerResponse } from 'node:http';
import { isJsonContentType } from '../http/body.js';
import { readBody, BodyTooLarge } from '../http/body.js';
import { sendError, sendJson } from '../http/errors.js';

/** What the admin API can change; the Router implements it (and hot reload uses the same calls). */
export interface AdminTarget {
  backendsState(): unknown;
  addBackend(body: unknown): Promise<void>;
  updateBackend(name: string, body: unknown): void;
  drainBackend(name: string, draining: boolean): void;
  removeBackend(name: string): void;
  setPolicy(body: unknown): void;
  decisions(limit: number): unknown;
}

/** A change the admin API refuses: 400 (or 404/409) with the reason; nothing was changed. */
export class AdminError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const ERROR_CODES: ReadonlyMap<number, string> = new Map([
  [404, 'not_found'],
  [409, 'conflict'],
  [413, 'body_too_large'],
  [415, 'unsupported_media_type'],
]);

const BACKEND_PATH = /^\/admin\/backends\/([^/]+)(\/drain|\/undrain)?$/;

/** A path segment, percent-decoded; malformed escapes (`%ZZ`) are the client's error. */
export function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new AdminError(400, `malformed percent-encoding in path segment '${segment}'`);
  }
}

async function jsonBody(req: IncomingMessage): Promise<unknown> {
  // A browser form or text/plain fetch (CSRF's simple requests) can't send this content type.
  if (!isJsonContentType(req)) throw new AdminError(415, 'content-type must be application/json');
  let raw: Buffer;
  try {
    raw = await readBody(req, 1 << 20);
  } catch (err) {
    if (err instanceof BodyTooLarge) throw new AdminError(413, 'body over 1 MiB');
    throw err;
  }
  try {
    return JSON.parse(raw.toString('utf8')) as unknown;
  } catch (err) {
    throw new AdminError(400, `invalid JSON body: ${(err as Error).message}`);
  }
}

/**
 * /admin/* routes, once admin-auth.ts has let the request in. Every change is validated before
 * anything is touched, so an invalid one answers 4xx and changes no state. Errors use the OpenAI
 * error shape.
 */
export async function handleAdmin(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  query: URLSearchParams,
  target: AdminTarget,
): Promise<void> {
  const method = req.method ?? 'GET';
  const notAllowed = (allow: string): void =>
    sendError(res, 'openai', 405, `method not allowed; use ${allow}`, 'method_not_allowed', { allow });
  try {
    if (path === '/admin/backends') {
      if (method === 'GET') return sendJson(res, 200, target.backendsState());
      if (method === 'POST') {
        await target.addBackend(await jsonBody(req));
        return sendJson(res, 201, target.backendsState());
      }
      return notAllowed('GET, POST');
    }
    if (path === '/admin/policy') {
      if (method !== 'PUT') return notAllowed('PUT');
      target.setPolicy(await jsonBody(req));
      return sendJson(res, 200, target.backendsState());
    }
    if (path === '/admin/decisions') {
      if (method !== 'GET') return notAllowed('GET');
      const limit = Number(query.get('limit') ?? '100');
      if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
        throw new AdminError(400, 'limit must be an integer in [1, 10000]');
      return sendJson(res, 200, target.decisions(limit));
    }
    const m = BACKEND_PATH.exec(path);
    if (m) {
      const name = decodeSegment(m[1]!);
      if (m[2]) {
        if (method !== 'POST') return notAllowed('POST');
        target.drainBackend(name, m[2] === '/drain');
        return sendJson(res, 200, target.backendsState());
      }
      if (method === 'PATCH') {
        target.updateBackend(name, await jsonBody(req));
        return sendJson(res, 200, target.backendsState());
      }
      if (method === 'DELETE') {
        target.removeBackend(name);
        return sendJson(res, 200, target.backendsState());
      }
      return notAllowed('PATCH, DELETE');
    }
    return sendError(res, 'openai', 404, `no admin route ${method} ${path}`, 'not_found');
  } catch (err) {
    if (err instanceof AdminError) {
      return sendError(
        res,
        'openai',
        err.status,
        err.message,
        ERROR_CODES.get(err.status) ?? 'invalid_request',
      );
    }
    throw err;
  }
}
