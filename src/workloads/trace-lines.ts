/**
 * Lines of a file read synchronously in fixed-size chunks: the simulator is synchronous, and a
 * production trace can be far larger than memory should hold, so only one chunk and one line are
 * kept at a time.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';

const CHUNK = 1 << 16;

/** `[lineNumber, text]` for each line (1-based; a trailing '\r' removed; blank lines included). */
export function* readLines(path: string): Generator<[number, string]> {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.allocUnsafe(CHUNK);
    const decoder = new StringDecoder('utf8');
    let rest = '';
    let n = 0;
    for (;;) {
      const got = readSync(fd, buf, 0, CHUNK, null);
      const text = got > 0 ? rest + decoder.write(buf.subarray(0, got)) : rest + decoder.end();
      let from = 0;
      for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', from)) {
        const end = nl > from && text.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
        yield [++n, text.slice(from, end)];
        from = nl + 1;
      }
      rest = text.slice(from);
      if (got === 0) {
        if (rest !== '') yield [++n, rest.endsWith('\r') ? rest.slice(0, -1) : rest];
        return;
      }
    }
  } finally {
    closeSync(fd);
  }
}
