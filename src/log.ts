import pino, { type Logger } from 'pino';

/** Bytes buffered before a write: about 15 request lines. */
const BATCH_BYTES = 4096;
/** The most a line waits in the buffer when traffic is too light to fill it. */
export const LOG_FLUSH_MS = 100;

/**
 * JSON logs to stdout (or `dest`, a file descriptor or path). Writes are asynchronous and batched:
 * an unbatched asynchronous write hands every line to libuv's thread pool on its own, which
 * measured about 20 µs of CPU per proxied request under load (bench:proxy with
 * BENCH_LLMLB_LOG=info). Lines are written once BATCH_BYTES have gathered, and at most
 * LOG_FLUSH_MS after they were logged; pino flushes what is left on exit.
 */
export function createLogger(level: string, name = 'llmlb', dest: number | string = 1): Logger {
  const stream = pino.destination({ dest, sync: false, minLength: BATCH_BYTES });
  let pending = false;
  const timer = setInterval(() => {
    if (!pending) return;
    pending = false;
    stream.flush();
  }, LOG_FLUSH_MS);
  timer.unref();
  stream.on('close', () => clearInterval(timer)); // flush() throws once the stream is destroyed
  return pino(
    {
      name,
      level,
      hooks: {
        streamWrite: (line: string): string => {
          pending = true;
          return line;
        },
      },
    },
    stream,
  );
}

/** A logger that drops everything (tests, benchmarks). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
