import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { parseConfig } from '../config/load.js';
import { defaultProfile, startEngine, type EngineServer } from '../engine/server.js';
import { startDelayingHop, type DelayingHop } from '../federation/delaying-hop.js';
import { createLogger, silentLogger } from '../log.js';
import { Router } from '../proxy/router.js';
import { portError } from './port-error.js';
import { policyValidation } from './serve.js';

/** Region names in the order `--regions n` takes them. */
export const DEMO_REGIONS = ['us', 'eu', 'asia', 'sa', 'oc'] as const;
/** Replicas per region; each takes one request at a time, so a region is full with two. */
export const REPLICAS_PER_REGION = 2;

export interface RegionsDemoOptions {
  /** First router's port; the others take the next ones (0: every port ephemeral). */
  readonly port: number;
  readonly regions: number;
  /** Latency one way between two regions (the delaying hop in front of each router). */
  readonly oneWayMs?: number;
  /** Router logs at warn (the CLI) or not at all (tests). */
  readonly quiet?: boolean;
}

export interface RegionsDemo {
  readonly routers: readonly { region: string; url: string; router: Router; engines: readonly string[] }[];
  readonly token: string;
  readonly oneWayMs: number;
  close(): Promise<void>;
}

/**
 * Three (or `regions`) routers on loopback, one per region, each with its own emulated engines and
 * with its peers reached through delaying TCP hops (cross-region latency): SkyLB's federation
 * (issue #19) on one machine. Prefix trie + SP-P at both layers, as `examples/regions-3` configure it.
 */
export async function startRegionsDemo(o: RegionsDemoOptions): Promise<RegionsDemo> {
  const oneWayMs = o.oneWayMs ?? 100;
  const names = DEMO_REGIONS.slice(0, o.regions);
  const engines: EngineServer[] = [];
  const hops = new Map<string, DelayingHop>();
  const routers: { region: string; url: string; router: Router; engines: string[] }[] = [];
  let closing: Promise<void> | undefined;
  // Once: a second call (Ctrl-C twice, a test's after hook) waits for the first.
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      await Promise.all(routers.map((r) => r.router.close()));
      await Promise.all([...hops.values()].map((h) => h.close()));
      await Promise.all(engines.map((e) => e.close()));
    })());
  // Admin is closed without a token: the demo makes one per run (all routers share it).
  const token = randomBytes(16).toString('hex');
  try {
    // A hop in front of each router: every peer reaches it `oneWayMs` away. Hops first, so each
    // router knows its peers' addresses; a hop learns its router's port once that one listens.
    for (const region of names) hops.set(region, await startDelayingHop(0, oneWayMs));
    for (const [i, region] of names.entries()) {
      const mine: EngineServer[] = [];
      for (let k = 0; k < REPLICAS_PER_REGION; k++) {
        const e = await startEngine({
          port: 0,
          api: 'both',
          models: ['llama3', 'qwen2.5'],
          profile: defaultProfile({ slots: 4 }),
          timeScale: 1,
          seed: 1000 * i + k,
          name: `${region}-${k}`,
        });
        engines.push(e);
        mine.push(e);
      }
      const yaml = [
        `server: { host: 127.0.0.1, port: 0 }`,
        `admin: { token: "${token}" }`,
        `region: ${region}`,
        'peers:',
        ...names
          .filter((p) => p !== region)
          .map((p) => `  - { name: ${p}, url: "${hops.get(p)!.url}", region: ${p} }`),
        'federation: { probeIntervalMs: 100, tau: 2 }',
        'policy: { name: prefix-trie, push: sp-p }',
        'backends:',
        ...mine.map(
          (e, k) => `  - { name: ${region}-${k}, url: "${e.url}", api: ollama, maxConcurrency: 1 }`,
        ),
      ].join('\n');
      const settings = parseConfig(yaml, { source: `demo region ${region}`, ...policyValidation() });
      const router = new Router(settings, o.quiet ? silentLogger() : createLogger('warn'));
      const port = o.port === 0 ? 0 : o.port + i;
      let url: string;
      try {
        url = await router.listen('127.0.0.1', port);
      } catch (err) {
        await router.close();
        throw portError(
          err,
          () => 'choose other router ports with --port (it takes that one and the next ones)',
        );
      }
      routers.push({ region, url, router, engines: mine.map((e) => e.url) });
      hops.get(region)!.target = Number(new URL(url).port);
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { routers, token, oneWayMs, close };
}

/** `llmlb demo --regions n`: start the regions, print how to see a forwarded request, run until Ctrl-C. */
export async function runRegionsDemo(o: { port: number; regions: number; load: boolean }): Promise<void> {
  const demo = await startRegionsDemo({ port: o.port, regions: o.regions });
  const [first] = demo.routers;
  const u = first!.url;
  const t = demo.token;
  process.stdout.write(
    [
      `llmlb: ${demo.routers.length} regions on loopback, ${demo.oneWayMs} ms one way between them (a delaying TCP hop in front of each router)`,
      ...demo.routers.flatMap((r) => [
        `  ${r.region.padEnd(5)} router ${r.url}   dashboard ${r.url}/dashboard?token=${t}`,
        `        replicas ${r.engines.map((e, k) => `${r.region}-${k} ${e}`).join(', ')} (one request at a time each)`,
      ]),
      '',
      `  admin token ${t} (made for this run); peer status: curl -s ${u}/federation/status`,
      '',
      `try: fill ${first!.region}'s ${REPLICAS_PER_REGION} replicas with long answers, then ask it again: another region answers`,
      `  for i in 1 2; do curl -s ${u}/api/generate -H 'x-llmlb-output-tokens: 400' -d '{"model":"llama3","prompt":"long '$i'","stream":false}' >/dev/null & done; sleep 0.5`,
      `  curl -si ${u}/api/generate -d '{"model":"llama3","prompt":"Why is the sky blue?","stream":false}' | grep -i '^x-llmlb-backend'`,
      `  → x-llmlb-backend: ${demo.routers[1]!.region}-0 (or another region's replica), one ${2 * demo.oneWayMs} ms round trip later`,
      '',
      o.load
        ? `a background workload keeps ${first!.region} busy (--no-load to stop it), so some of its requests go to peers; Ctrl-C to quit`
        : 'Ctrl-C to quit',
      '',
    ].join('\n'),
  );
  let stopping = false;
  if (o.load)
    busyRegion(u, () => stopping).catch((err: unknown) =>
      process.stderr.write(`background load stopped: ${String(err)}\n`),
    );
  const stop = (): void => {
    stopping = true;
    demo.close().then(
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

/** Three clients on one region's router (its busy hours): more than its replicas take at once. */
async function busyRegion(url: string, stopped: () => boolean): Promise<void> {
  const client = async (c: number): Promise<void> => {
    for (let i = 0; !stopped(); i++) {
      try {
        const res = await request(`${url}/api/generate`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-llmlb-output-tokens': String(60 + ((i * 53) % 200)),
          },
          body: JSON.stringify({ model: 'llama3', prompt: `user ${c} asks question ${i}`, stream: false }),
        });
        await res.body.dump();
      } catch {
        // the routers are shutting down
      }
      await new Promise((r) => setTimeout(r, 300 + ((i * 97) % 900)));
    }
  };
  await Promise.all([0, 1, 2].map(client));
}
