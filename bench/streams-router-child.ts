/**
 * llmlb's Router for the 1,000-streams benchmark, alone in its process: least-connections over
 * the upstream URLs given as arguments, no concurrency cap, log silent, admin token from
 * BENCH_ADMIN_TOKEN (the benchmark reads in-flight from /admin/backends). The configuration goes
 * through the config parser, so every other setting is the default `llmlb serve` runs with.
 * Usage: node bench/streams-router-child.js URL...
 */
import { parseConfig } from '../src/config/load.js';
import { policyValidation } from '../src/commands/serve.js';
import { createLogger, silentLogger } from '../src/log.js';
import { Router } from '../src/proxy/router.js';
import { exitWithParent, sendReady } from './common.js';

async function main(): Promise<void> {
  const upstreams = process.argv.slice(2);
  if (upstreams.length === 0) throw new Error('usage: streams-router-child.js UPSTREAM_URL...');
  const token = process.env.BENCH_ADMIN_TOKEN;
  const level = process.env.BENCH_LLMLB_LOG;
  const config = {
    server: { host: '127.0.0.1', port: 0 },
    backends: upstreams.map((url, i) => ({ name: `u${i}`, url, api: 'ollama', models: ['m'] })),
    policy: { name: 'least-connections' },
    log: { level: level || 'silent' },
    ...(token ? { admin: { token } } : {}),
  };
  const settings = parseConfig(JSON.stringify(config), { source: 'bench.json', ...policyValidation() });
  const log = level ? createLogger(settings.log.level, 'llmlb', 2) : silentLogger();
  const router = new Router(settings, log);
  const url = await router.listen(settings.server.host, settings.server.port);
  exitWithParent(() => router.close());
  sendReady([url]);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
