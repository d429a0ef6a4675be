/**
 * Pieces for benches and tests that run several `llmlb serve` processes on one fleet (issue #31):
 * router child processes (`node dist/cli.js serve`, or `tsx src/cli.ts` when dist/ is missing or
 * older than src/),
 * a counting HTTP hop in front of each engine (the most requests an engine had at once, whoever
 * sent them), a TCP hop that can be cut (a router cut off from Redis but not from the engines),
 * and a reader of the shared view's Redis hashes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, createServer as createTcpServer, type Server, type Socket } from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import type { Redis } from 'ioredis';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** An engine behind a hop that counts the generation requests it has open at once. */
export interface CountedEngine {
  readonly url: string;
  /** Requests open through the hop now. */
  readonly inFlight: number;
  /** The most open at once since the last resetPeak(). */
  readonly peak: number;
  resetPeak(): void;
  close(): Promise<void>;
}

/**
 * An HTTP hop to `target` that counts open POSTs (generation requests) from the request's arrival
 * to the end of its response. GETs (probes, /metrics scrapes) and the router's marked route probes
 * (`x-llmlb-probe`) pass uncounted.
 */
export async function countingHop(target: string): Promise<CountedEngine> {
  const agent = new Agent({ connections: 256, keepAliveTimeout: 30_000 });
  let open = 0;
  let peak = 0;
  const srv = createHttpServer((req: IncomingMessage, res: ServerResponse) => {
    // The router's route probes (an empty body, refused: no generation) are marked and not counted.
    const counted = req.method === 'POST' && req.headers['x-llmlb-probe'] === undefined;
    if (counted) {
      open++;
      if (open > peak) peak = open;
    }
    let released = false;
    const release = (): void => {
      if (counted && !released) {
        released = true;
        open--;
      }
    };
    const ac = new AbortController();
    // The client gone before its answer ended: drop the engine's request too.
    res.once('close', () => {
      release();
      if (!res.writableFinished) ac.abort();
    });
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(req.headers))
      if (v !== undefined && k !== 'host' && k !== 'connection') headers[k] = v;
    request(target + (req.url ?? '/'), {
      method: req.method as 'GET' | 'POST',
      headers,
      body: req.method === 'POST' ? req : null,
      dispatcher: agent,
      signal: ac.signal,
    })
      .then(({ statusCode, headers: h, body }) => {
        const out: Record<string, string | string[]> = {};
        for (const [k, v] of Object.entries(h))
          if (v !== undefined && k !== 'connection' && k !== 'keep-alive' && k !== 'transfer-encoding')
            out[k] = v;
        res.writeHead(statusCode, out);
        body.on('error', () => res.destroy());
        // Released when the engine's answer has all arrived, before its end is passed on: a
        // router that frees the slot on that end and pushes the next request must find it
        // released (the response's 'close' can come later than that request in this loop).
        body.once('end', release);
        body.pipe(res);
      })
      .catch((e: unknown) => {
        if (process.env.HOP_DEBUG) console.error(e);
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
        res.end('{"error":"hop: engine unreachable"}');
      });
  });
  srv.keepAliveTimeout = 30_000;
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    get inFlight() {
      return open;
    },
    get peak() {
      return peak;
    },
    resetPeak() {
      peak = open;
    },
    async close() {
      srv.closeAllConnections();
      await new Promise<void>((r) => srv.close(() => r()));
      await agent.close();
    },
  };
}

/** A TCP hop to host:port that can be cut (every connection dropped, new ones refused) and mended. */
export interface CuttableHop {
  readonly port: number;
  cut(): void;
  mend(): void;
  close(): Promise<void>;
}

export async function tcpHop(targetPort: number): Promise<CuttableHop> {
  const pairs = new Set<Socket>();
  let cut = false;
  const srv: Server = createTcpServer((client) => {
    if (cut) {
      client.destroy();
      return;
    }
    const up = connect(targetPort, '127.0.0.1');
    pairs.add(client).add(up);
    const drop = (): void => {
      client.destroy();
      up.destroy();
      pairs.delete(client);
      pairs.delete(up);
    };
    client.on('error', drop).on('close', drop);
    up.on('error', drop).on('close', drop);
    client.pipe(up).pipe(client);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const cutAll = (): void => {
    cut = true;
    for (const s of pairs) s.destroy();
    pairs.clear();
  };
  return {
    port: (srv.address() as { port: number }).port,
    cut: cutAll,
    mend() {
      cut = false;
    },
    async close() {
      cutAll();
      await new Promise<void>((r) => srv.close(() => r()));
    },
  };
}

/** One `llmlb serve` child process. */
export interface RouterProc {
  readonly url: string;
  readonly proc: ChildProcess;
  /** The id its shared view publishes under (host-pid-random): the field prefix is host-pid-. */
  readonly idPrefix: string;
  kill9(): Promise<void>;
  close(): Promise<void>;
}

export interface RouterYaml {
  backends: readonly { name: string; url: string; cap?: number }[];
  policy: string;
  model: string;
  /** Shared view on this Redis under this key prefix; absent: a router on its own. */
  shared?: { redis: string; prefix: string; intervalMs?: number; ttlMs?: number };
  extra?: string;
}

export function routerYaml(o: RouterYaml): string {
  const lines = [
    'server: { host: 127.0.0.1, port: 0 }',
    'log: { level: warn }',
    `policy: ${o.policy}`,
    'queue: { maxLength: 10000, maxWaitMs: 60000 }',
    'backends:',
    ...o.backends.map(
      (b) =>
        `  - { name: ${b.name}, url: '${b.url}', api: openai, models: [${o.model}]` +
        (b.cap !== undefined ? `, maxConcurrency: ${b.cap}` : '') +
        ' }',
    ),
  ];
  if (o.shared)
    lines.push(
      `sharedView: { redis: '${o.shared.redis}', prefix: '${o.shared.prefix}'` +
        (o.shared.intervalMs !== undefined ? `, intervalMs: ${o.shared.intervalMs}` : '') +
        (o.shared.ttlMs !== undefined ? `, ttlMs: ${o.shared.ttlMs}` : '') +
        ' }',
    );
  if (o.extra) lines.push(o.extra);
  return lines.join('\n') + '\n';
}

/** The newest modification time under `dir` (ms). */
function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

let cliArgs: string[] | undefined;

/** dist/cli.js when it is built and newer than every source file; else src/cli.ts through tsx. */
function cli(): string[] {
  if (cliArgs) return cliArgs;
  const dist = join(ROOT, 'dist/cli.js');
  if (existsSync(dist) && statSync(dist).mtimeMs >= newest(join(ROOT, 'src'))) cliArgs = [dist];
  else {
    process.stderr.write(
      'routers run src/cli.ts through tsx (dist/ missing or older than src/: npm run build)\n',
    );
    cliArgs = ['--import', 'tsx', join(ROOT, 'src/cli.ts')];
  }
  return cliArgs;
}

/** Start `llmlb serve` on `yaml` in a child process; resolves with its URL once it listens. */
export async function spawnRouter(yaml: string): Promise<RouterProc> {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-replica-'));
  const file = join(dir, 'llmlb.yaml');
  writeFileSync(file, yaml);
  const args = [...cli(), 'serve', '--config', file];
  const proc = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => {
    err = (err + c.toString()).slice(-4000);
  });
  const url = await new Promise<string>((res, rej) => {
    let out = '';
    const t = setTimeout(() => rej(new Error(`router did not start in 30 s: ${err}`)), 30_000);
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /llmlb listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(t);
        res(m[1]!);
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(t);
      rej(new Error(`router exited (${code}): ${err}`));
    });
  });
  const gone = new Promise<void>((r) => {
    if (proc.exitCode !== null || proc.signalCode !== null) r();
    else proc.once('exit', () => r());
  });
  const stop = async (sig: NodeJS.Signals): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill(sig);
    await gone;
    rmSync(dir, { recursive: true, force: true });
  };
  return {
    url,
    proc,
    idPrefix: `${hostname()}-${proc.pid}-`,
    kill9: () => stop('SIGKILL'),
    close: () => stop('SIGTERM'),
  };
}

/** Per backend, the shared view's fields in Redis: router id → { inFlight, held, expiresAt }. */
export async function sharedFields(
  redis: Redis,
  prefix: string,
  backends: readonly string[],
): Promise<Map<string, Map<string, { inFlight: number; held: number; expiresAt: number }>>> {
  const out = new Map<string, Map<string, { inFlight: number; held: number; expiresAt: number }>>();
  for (const b of backends) {
    const h = await redis.hgetall(`${prefix}:shared-view:${b}`);
    const m = new Map<string, { inFlight: number; held: number; expiresAt: number }>();
    for (const [id, v] of Object.entries(h)) {
      const [a, c, e] = v.split(' ').map(Number);
      m.set(id, { inFlight: a!, held: c!, expiresAt: e! });
    }
    out.set(b, m);
  }
  return out;
}

/** `llmlb_shared_view_up` on a router's /metrics (undefined: no such gauge or no answer). */
export async function sharedViewUp(url: string): Promise<number | undefined> {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    const m = /^llmlb_shared_view_up (\d+)/m.exec(text);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}
