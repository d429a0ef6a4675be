import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import { LeaseNotFoundError, QuotaError, TooLargeError, UnknownModelError } from '../core/quota/index.js';
import { isJsonContentType } from '../http/body.js';
import { BodyTooLarge, readBody } from '../http/body.js';
import { sendError, sendJson, type ErrorFormat } from '../http/errors.js';
import { describeIssues, quotaPatchBody, scheduleBody, taskBody } from './bodies.js';
import type { Admission } from './service.js';

const QUOTA_PATH = /^\/admin\/quotas\/([^/]+)$/;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

async function parse<T extends z.ZodType>(
  req: IncomingMessage,
  schema: T,
  requireJson = false,
): Promise<z.output<T>> {
  // Admin changes only: a cross-site form or text/plain fetch can't send this content type.
  if (requireJson && !isJsonContentType(req))
    throw new HttpError(415, 'content-type must be application/json', 'unsupported_media_type');
  let raw: Buffer;
  try {
    raw = await readBody(req, 64 * 1024);
  } catch (err) {
    if (err instanceof BodyTooLarge) throw new HttpError(413, 'body over 64 KiB', 'body_too_large');
    throw err;
  }
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new HttpError(400, `invalid JSON body: ${(err as Error).message}`, 'invalid_json');
  }
  const r = schema.safeParse(json);
  if (!r.success) throw new HttpError(400, describeIssues(r.error), 'invalid_body');
  return r.data;
}

/** A path segment, percent-decoded; a malformed escape (`%ZZ`) is a 400, not a store failure. */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, `malformed percent-encoding in path segment '${segment}'`, 'invalid_path');
  }
}

function statusOf(err: QuotaError): number {
  if (err instanceof LeaseNotFoundError || err instanceof UnknownModelError) return 404;
  if (err instanceof TooLargeError) return 422;
  return 400;
}

/**
 * Admission API (the quota-aware router): POST /schedule, /complete, /heartbeat, GET /advice, plus
 * GET /admin/quotas and PATCH /admin/quotas/:model (the router lets admin requests in first:
 * admin-auth.ts). Returns false for any other path. Errors are `{"error": "…"}` (the quota-aware router's
 * shape) on the client routes, the OpenAI shape on /admin like the other admin routes. Every
 * rejection happens before the store is touched.
 */
export function handleAdmission(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  admission: Admission,
): boolean {
  let run: (() => Promise<void>) | undefined;
  let format: ErrorFormat = 'ollama';
  const method = req.method ?? 'GET';
  const only = (m: string, fn: () => Promise<void>): (() => Promise<void>) =>
    method === m
      ? fn
      : async () =>
          void sendError(res, format, 405, `method not allowed; use ${m}`, 'method_not_allowed', {
            allow: m,
          });
  switch (path) {
    case '/schedule':
      run = only('POST', () => schedule(req, res, admission));
      break;
    case '/complete':
      run = only('POST', async () => {
        const b = await parse(req, taskBody);
        await admission.store.complete(b.task_id);
        sendJson(res, 200, { ok: true });
      });
      break;
    case '/heartbeat':
      run = only('POST', () => heartbeat(req, res, admission));
      break;
    case '/advice':
      run = only('GET', async () => sendJson(res, 200, await admission.store.advice()));
      break;
    default: {
      const m = path === '/admin/quotas' ? null : QUOTA_PATH.exec(path);
      if (path !== '/admin/quotas' && !m) return false;
      format = 'openai';
      run = m
        ? only('PATCH', async () => {
            const model = decodeSegment(m[1]!);
            const b = await parse(req, quotaPatchBody, true);
            const limits = await admission.store.setLimits(model, b);
            admission.noteLimits(model, limits);
            sendJson(res, 200, { model, limits });
          })
        : only('GET', async () => sendJson(res, 200, { models: await admission.store.snapshot() }));
    }
  }
  run().catch((err: unknown) => {
    if (err instanceof HttpError) return sendError(res, format, err.status, err.message, err.code);
    if (err instanceof QuotaError) return sendError(res, format, statusOf(err), err.message, err.code);
    admission.metrics.decisions.inc({ outcome: 'error' });
    // The store fails fast in an outage and probes for Redis every 250 ms: worth a retry soon.
    sendError(res, format, 503, `quota store unavailable: ${(err as Error).message}`, 'store_unavailable', {
      'retry-after': '1',
    });
  });
  return true;
}

async function schedule(req: IncomingMessage, res: ServerResponse, admission: Admission): Promise<void> {
  const b = await parse(req, scheduleBody);
  const r = await admission.store.acquire({
    tokens: b.estimated_tokens,
    ...(b.model !== undefined ? { model: b.model } : {}),
  });
  admission.metrics.decisions.inc({ outcome: r.kind === 'admitted' ? 'admitted' : 'wait' });
  if (r.kind === 'admitted') sendJson(res, 200, { model_backend_id: r.lease.model, task_id: r.lease.id });
  else sendJson(res, 200, { wait_for_ms: r.waitForMs });
}

async function heartbeat(req: IncomingMessage, res: ServerResponse, admission: Admission): Promise<void> {
  const b = await parse(req, taskBody);
  try {
    const l = await admission.store.heartbeat(b.task_id);
    sendJson(res, 200, { ok: true, expires_at: new Date(l.expiresAt).toISOString() });
  } catch (err) {
    // The quota-aware router's not-found shape, with the usual error text alongside.
    if (err instanceof LeaseNotFoundError)
      return sendJson(res, 404, { ok: false, reason: 'not_found', error: err.message });
    throw err;
  }
}
