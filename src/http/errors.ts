import type { ServerResponse } from 'node:http';

/**
 * Which error shape a client expects: Ollama `{"error": "…"}`, OpenAI `{"error": {…}}` or
 * Anthropic `{"type": "error", "error": {"type", "message"}}`.
 */
export type ErrorFormat = 'ollama' | 'openai' | 'anthropic';

const openaiType = (status: number): string =>
  status === 401
    ? 'authentication_error'
    : status === 404
      ? 'not_found_error'
      : status < 500
        ? 'invalid_request_error'
        : 'server_error';

/** Anthropic's error types by status (its documented list; 529 is its "overloaded"). */
const anthropicType = (status: number): string =>
  status === 401
    ? 'authentication_error'
    : status === 403
      ? 'permission_error'
      : status === 404
        ? 'not_found_error'
        : status === 413
          ? 'request_too_large'
          : status === 429
            ? 'rate_limit_error'
            : status === 503 || status === 529
              ? 'overloaded_error'
              : status < 500
                ? 'invalid_request_error'
                : 'api_error';

export function errorBody(format: ErrorFormat, status: number, message: string, code: string): string {
  if (format === 'anthropic')
    return JSON.stringify({ type: 'error', error: { type: anthropicType(status), message } });
  return format === 'openai'
    ? JSON.stringify({ error: { message, type: openaiType(status), code } })
    : JSON.stringify({ error: message });
}

/** Send a complete error response, unless the response has already started. */
export function sendError(
  res: ServerResponse,
  format: ErrorFormat,
  status: number,
  message: string,
  code: string,
  extraHeaders?: Record<string, string>,
): void {
  if (res.headersSent) {
    if (!res.writableEnded) res.end();
    return;
  }
  const body = errorBody(format, status, message, code);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    ...extraHeaders,
  });
  res.end(body);
}

/**
 * The error to append to a stream that already sent bytes: one more NDJSON line for Ollama,
 * an SSE event for OpenAI (a named `error` event for Anthropic) — so clients see why the stream ended instead of a silent cut.
 */
export function streamErrorChunk(format: ErrorFormat, message: string): string {
  if (format === 'anthropic') return `event: error\ndata: ${errorBody('anthropic', 502, message, '')}\n\n`;
  return format === 'openai'
    ? `data: ${errorBody('openai', 502, message, 'upstream_error')}\n\n`
    : `${errorBody('ollama', 502, message, 'upstream_error')}\n`;
}

export function sendJson(
  res: ServerResponse,
  status: number,
  value: unknown,
  headers?: Record<string, string>,
): void {
  const body = JSON.stringify(value);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}
