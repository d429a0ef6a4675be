/** Request bodies, shared by the router, the admission API and the emulated engine. */
import type { IncomingMessage } from 'node:http';

/** A JSON body: state-changing routes refuse others (a cross-site form cannot send JSON). */
export function isJsonContentType(req: IncomingMessage): boolean {
  const ct = req.headers['content-type'];
  return ct !== undefined && /^application\/json\s*(;|$)/i.test(ct.trim());
}

export class BodyTooLarge extends Error {}

/**
 * Read a request body into one Buffer, refusing more than `limit` bytes (checked up front when
 * declared). A body that never finishes arriving is the HTTP server's requestTimeout to cut (408).
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(new BodyTooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume(); // discard the rest; the caller answers 413
        reject(new BodyTooLarge());
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    req.on('error', reject);
  });
}

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Whether a JSON text nests objects/arrays deeper than `limit`, read from its bytes before any
 * parse: recursive code (translation, schema walks) must never meet a body that overflows its stack.
 * Brackets inside strings do not count. Invalid JSON is the parser's to report.
 */
export function jsonDepthExceeds(raw: Buffer, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
  }
  return false;
}
