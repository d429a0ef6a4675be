/**
 * llmlb's Router for the proxy benchmark, alone in its process: least-connections over the
 * upstream URLs given as arguments. Usage: node --import tsx bench/router-child.ts URL...
 */
import { LOG_LEVELS, type LogLevel } from '../src/config/schema.js';
import { createLogger, silentLogger } from '../src/log.js';
import { Router, type RouterSettings } from '../src/proxy/router.js';
import { exitWithParent, sendReady } from './common.js';

const LOG_LEVEL = ((): LogLevel | undefined => {
  const v = process.env.BENCH_LLMLB_LOG;
  if (v === undefined || v === '') return undefined;
  if (!(LOG_LEVELS as readonly string[]).includes(v))
    throw new Error(`BENCH_LLMLB_LOG must be one of ${LOG_LEVELS.join(', ')}`);
  return v as LogLevel;
})();

async function main(): Promise<void> {
  const upstreams = process.argv.slice(2);
  if (upstreams.length === 0) throw new Error('usage: router-child.ts UPSTREAM_URL...');
  const settings: RouterSettings = {
    server: { host: '127.0.0.1', port: 0, maxBodyBytes: 10 << 20 },
    backends: upstreams.map((url, i) => ({
      name: String.fromCharCode(97 + i),
      url,
      api: 'ollama',
      models: ['m'],
      maxConcurrency: Infinity,
      weight: 1,
    })),
    policy: { name: 'least-connections', params: {} },
    retry: { attempts: 4, backoffMs: 25 },
    timeouts: { connectMs: 5000, firstByteMs: 600_000, idleMs: 120_000 },
    health: { failuresToEject: 3, probeIntervalMs: 5000, probeTimeoutMs: 2000, scrapeIntervalMs: 1000 },
    discovery: { refreshMs: 30_000 },
    queue: { maxLength: 100_000, maxWaitMs: 600_000 },
    log: { level: LOG_LEVEL ?? 'silent', prompts: false },
    // BENCH_LLMLB_TRACE=FILE: the trace capture (`trace:` in a config) on, to measure its cost.
    ...(process.env.BENCH_LLMLB_TRACE
      ? { trace: { file: process.env.BENCH_LLMLB_TRACE, maxBytes: 1e9, keep: 1 } }
      : {}),
  };
  // BENCH_LLMLB_LOG=info: the per-request log line an operator keeps, through llmlb's own logger, to /dev/null.
  const log = LOG_LEVEL === undefined ? silentLogger() : createLogger(LOG_LEVEL, 'llmlb', '/dev/null');
  const router = new Router(settings, log);
  const url = await router.listen(settings.server.host, settings.server.port);
  exitWithParent(() => router.close());
  sendReady([url]);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
