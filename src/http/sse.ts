/**
 * The JSON object one server-sent event carries in its `data:` line(s) (LF or CRLF lines, one
 * optional space after the colon), or undefined: no data, `[DONE]`, not JSON, not an object. The
 * one reader of OpenAI-style SSE payloads for the translators and the usage scanner.
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
