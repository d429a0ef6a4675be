import { StringDecoder } from 'node:string_decoder';

/**
 * The one server-sent-events decoder: bytes in as they come, whole events out. An event ends at a
 * blank line (LF LF or CRLF CRLF, whatever the chunking); a UTF-8 character split between chunks
 * is held until its last byte comes. The translators (OpenAI chat → Ollama NDJSON, → Responses,
 * → Anthropic Messages) read their upstream stream with it; `sseEventObject` reads one event's data.
 * (`proxy/stream-usage.ts` scans pass-through streams byte by byte instead: it never decodes.)
 */
export class SseDecoder {
  private buf = '';
  private readonly utf8 = new StringDecoder('utf8');

  /** The events completed by this chunk, each without its blank line. */
  push(chunk: Buffer): string[] {
    this.buf += this.utf8.write(chunk);
    const out: string[] = [];
    let from = 0;
    // The next CRLF blank line, searched again only once passed: an LF stream scans for it once.
    let crlf = this.buf.indexOf('\n\r\n');
    for (;;) {
      const lf = this.buf.indexOf('\n\n', from);
      if (crlf >= 0 && crlf < from) crlf = this.buf.indexOf('\n\r\n', from);
      const at = lf < 0 ? crlf : crlf < 0 ? lf : Math.min(lf, crlf);
      if (at < 0) break;
      out.push(this.buf.slice(from, at));
      from = at + (at === crlf ? 3 : 2);
    }
    if (from > 0) this.buf = this.buf.slice(from);
    return out;
  }

  /** What is left when the stream ends: a last event without its blank line, else undefined. */
  end(): string | undefined {
    const rest = this.buf + this.utf8.end();
    this.buf = '';
    return rest.trim() === '' ? undefined : rest;
  }
}

/**
 * The JSON object one server-sent event carries in its `data:` line(s) (LF or CRLF lines, one
 * optional space after the colon), or undefined: no data, `[DONE]`, not JSON, not an object. The
 * one reader of SSE payloads for the translators and the usage scanner.
 */
export function sseEventObject(event: string): Record<string, unknown> | undefined {
  let data = '';
  for (const line of event.split('\n')) {
    const l = line.endsWith('\r') ? line.slice(0, -1) : line;
    if (l.startsWith('data:')) data += l.slice(l[5] === ' ' ? 6 : 5);
  }
  if (data === '' || data === '[DONE]') return undefined;
  let o: unknown;
  try {
    o = JSON.parse(data);
  } catch {
    return undefined;
  }
  return typeof o === 'object' && o !== null && !Array.isArray(o)
    ? (o as Record<string, unknown>)
    : undefined;
}

/** One named SSE event as Anthropic and the Responses API write it: `event:` then `data:`. */
export function sseEvent(type: string, data: string): string {
  return `event: ${type}\ndata: ${data}\n\n`;
}
