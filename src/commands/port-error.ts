import { UsageError } from './usage-error.js';

/**
 * A listen that failed because the port is taken (or reserved) becomes one line for the user,
 * naming the port and how to choose another (the CLI prints a UsageError and exits 2). Any
 * other error is returned as it was.
 */
export function portError(err: unknown, howToChange: (port: number | undefined) => string): unknown {
  const e = err as NodeJS.ErrnoException & { port?: unknown };
  if (e?.code !== 'EADDRINUSE' && e?.code !== 'EACCES') return err;
  const port = typeof e.port === 'number' ? e.port : undefined;
  const what = port === undefined ? 'the port' : `port ${port}`;
  const why = e.code === 'EADDRINUSE' ? 'is already in use' : 'needs privileges this process lacks';
  return new UsageError(`${what} ${why}; ${howToChange(port)}`);
}
