/** Small node:http helpers for the emulated engine: JSON bodies in, JSON and API-format errors out. */
import type { IncomingMessage, ServerResponse } from 'node:http';
// The router's error bodies: the emulated engine answers in the same API formats.
import { errorBody } from '../http/errors.js';
import type { ErrorFormat } from './wire.js';

export type Obj = Record<string, unknown>;

const MAX_BODY_BYTES = 32 * 1024 * 1024;

/** Thrown while reading a request: answered with `status` in the endpoint's error format. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

export const positiveInt = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) && v >= 1 ? Math.floor(v) : undefined;

export function send(res: ServerResponse, status: number, body: string, type: string, headers?: Obj): void {
  if (res.headersSent) {
    if (!res.writableEnded) res.end();
    return;
  }
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

export const sendJson = (res: ServerResponse, status: number, value: unknown): void =>
  send(res, status, JSON.stringify(value), 'application/json; charset=utf-8');

export const sendError = (
  res: ServerResponse,
  f: ErrorFormat,
  status: number,
  message: string,
  code: string,
  headers?: Record<string, string>,
): void => send(res, status, errorBody(f, status, message, code), 'application/json; charset=utf-8', headers);

export function readJson(req: IncomingMessage): Promise<Obj> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        reject(new HttpError(413, 'request body too large', 'body_too_large'));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('error', reject);
    req.on('end', () => {
      let v: unknown;
      try {
        v = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch (err) {
        reject(new HttpError(400, `invalid JSON body: ${(err as Error).message}`, 'invalid_json'));
        return;
      }
      if (typeof v !== 'object' || v === null || Array.isArray(v)) {
        reject(new HttpError(400, 'request body must be a JSON object', 'invalid_body'));
      } else resolve(v as Obj);
    });
  });
}
