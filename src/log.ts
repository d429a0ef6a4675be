import pino, { type Logger } from 'pino';

/**
 * JSON logs to stdout. Asynchronous writes keep the request path from blocking on the terminal;
 * pino flushes what is buffered on exit.
 */
export function createLogger(level: string, name = 'llmlb'): Logger {
  return pino({ name, level }, pino.destination({ dest: 1, sync: false }));
}

/** A logger that drops everything (tests, benchmarks). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
