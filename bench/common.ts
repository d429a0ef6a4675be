/**
 * Shared bits of the benchmarks: the messages children send and the request they all see, and
 * reading numeric settings from the environment.
 */

/** What a child process sends its parent once it listens. */
export interface ReadyMessage {
  readonly type: 'ready';
  readonly urls: readonly string[];
}

export function isReadyMessage(m: unknown): m is ReadyMessage {
  if (typeof m !== 'object' || m === null) return false;
  const o = m as { type?: unknown; urls?: unknown };
  return o.type === 'ready' && Array.isArray(o.urls) && o.urls.every((u) => typeof u === 'string');
}

/** The one request body every target gets: a ~200-byte non-streamed Ollama /api/generate. */
export const GENERATE_BODY = JSON.stringify({
  model: 'm',
  prompt:
    'Summarize in one sentence: the quick brown fox jumps over the lazy dog while the balancer routes it.',
  stream: false,
  options: { temperature: 0, num_predict: 16, seed: 42 },
});

/** The trivial upstream's whole answer to POST /api/generate. */
export const GENERATE_ANSWER = JSON.stringify({
  model: 'm',
  response: 'ok',
  done: true,
  prompt_eval_count: 1,
  eval_count: 1,
});

/** Ends this child when its parent goes away (the IPC channel closes) or asks it to stop. */
export function exitWithParent(close: () => Promise<void>): void {
  let closing = false;
  const stop = (): void => {
    if (closing) return;
    closing = true;
    // process.exit (not a signal's default action) so `--cpu-prof` gets to write its profile.
    const hard = setTimeout(() => process.exit(0), 3000);
    hard.unref();
    close()
      .catch(() => undefined)
      .finally(() => process.exit(0));
  };
  process.on('disconnect', stop);
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

export function sendReady(urls: readonly string[]): void {
  const msg: ReadyMessage = { type: 'ready', urls };
  if (process.send) process.send(msg);
  else console.log(JSON.stringify(msg));
}

/**
 * A numeric setting from the environment: `fallback` when unset, an error when not a number (a
 * whole one with `integer`) or below `min`.
 */
export function envNumber(name: string, fallback: number, min: number, integer = false): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!(integer ? Number.isInteger(n) : Number.isFinite(n)) || n < min)
    throw new Error(`${name} must be ${integer ? 'an integer' : 'a number'} ≥ ${min} (got '${raw}')`);
  return n;
}

/** envNumber for settings that must be whole numbers. */
export function envInt(name: string, fallback: number, min: number): number {
  return envNumber(name, fallback, min, true);
}
