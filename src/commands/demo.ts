import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { parseConfig } from '../config/load.js';
import { defaultProfile, startEngine, type EngineServer } from '../engine/server.js';
import { createLogger } from '../log.js';
import { Router } from '../proxy/router.js';
import { policyValidation } from './serve.js';
import { portError } from './port-error.js';

/** Three engines of unequal hardware: a fast GPU, a slower GPU, a CPU box. */
const ENGINES = [
  { name: 'gpu-fast', port: 11501, speed: 1, slots: 4 },
  { name: 'gpu-slow', port: 11502, speed: 0.5, slots: 4 },
  { name: 'cpu-box', port: 11503, speed: 0.1, slots: 2 },
] as const;

/**
 * `llmlb demo` (what `npm start` runs): emulated engines and the router on fixed local ports,
 * no outside services, plus a gentle background workload so balancing is visible at once.
 */
export async function runDemo(o: { port: number; load: boolean }): Promise<void> {
  const engines: EngineServer[] = [];
  for (const e of ENGINES) {
    try {
      engines.push(
        await startEngine({
          port: e.port,
          api: 'both',
          models: ['llama3', 'qwen2.5'],
          profile: defaultProfile({ speed: e.speed, slots: e.slots }),
          timeScale: 1,
          seed: e.port,
          name: e.name,
        }),
      );
    } catch (err) {
      throw portError(err, () => `the demo's engine ${e.name} needs it: stop what holds it (another demo?)`);
    }
  }
  // Admin is closed without a token: the demo makes one per run and prints it.
  const token = randomBytes(16).toString('hex');
  const yaml = [
    `server: { host: 127.0.0.1, port: ${o.port} }`,
    `admin: { token: "${token}" }`,
    'policy: estimated-wait',
    'backends:',
    ...ENGINES.map((e) => `  - { name: ${e.name}, url: "http://127.0.0.1:${e.port}", api: ollama }`),
  ].join('\n');
  const settings = parseConfig(yaml, { source: 'demo', ...policyValidation() });
  const router = new Router(settings, createLogger('warn'));
  let url: string;
  try {
    url = await router.listen(settings.server.host, settings.server.port);
  } catch (err) {
    throw portError(err, () => 'choose another with --port');
  }
  process.stdout.write(
    [
      `llmlb listening on ${url}`,
      ...ENGINES.map(
        (e) =>
          `  engine ${e.name.padEnd(9)} http://127.0.0.1:${e.port}  (speed ${e.speed}, ${e.slots} slots)`,
      ),
      '',
      `  dashboard  ${url}/dashboard?token=${token}   ← open this: live queues, throughput, latency`,
      `  metrics    ${url}/metrics`,
      `  admin      token ${token} (made for this run)`,
      `             curl -s ${url}/admin/backends -H 'authorization: Bearer ${token}'`,
      '',
      'try:',
      `  curl -s ${url}/api/generate -d '{"model":"llama3","prompt":"Why is the sky blue?","stream":false}'`,
      `  curl -s ${url}/v1/chat/completions -H 'content-type: application/json' -d '{"model":"llama3","messages":[{"role":"user","content":"hi"}]}'`,
      '',
      o.load ? 'a background workload is running (--no-load to stop it); Ctrl-C to quit' : 'Ctrl-C to quit',
      '',
    ].join('\n'),
  );
  let stopping = false;
  if (o.load)
    backgroundLoad(url, () => stopping).catch((err: unknown) =>
      process.stderr.write(`background load stopped: ${String(err)}\n`),
    );
  const stop = (): void => {
    stopping = true;
    Promise.all([router.close(), ...engines.map((e) => e.close())]).then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`llmlb demo: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

/** A few clients sending varied prompts in a loop, with short pauses. */
async function backgroundLoad(url: string, stopped: () => boolean): Promise<void> {
  const words = 'the quick brown fox jumps over lazy dogs while routers balance queues'.split(' ');
  const client = async (c: number): Promise<void> => {
    for (let i = 0; !stopped(); i++) {
      const n = 20 + ((i * 37 + c * 11) % 400);
      const prompt = Array.from({ length: n }, (_, k) => words[(k + c) % words.length]).join(' ');
      try {
        const res = await request(`${url}/api/generate`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-llmlb-output-tokens': String(20 + ((i * 53) % 180)),
          },
          body: JSON.stringify({ model: i % 3 === 0 ? 'qwen2.5' : 'llama3', prompt, stream: false }),
        });
        await res.body.dump();
      } catch {
        // the router is shutting down
      }
      await new Promise((r) => setTimeout(r, 200 + ((i * 97) % 800)));
    }
  };
  await Promise.all([0, 1, 2, 3, 4, 5].map(client));
}
