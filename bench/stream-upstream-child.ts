/**
 * Minimal streaming Ollama-style upstreams for the 1,000-streams benchmark, all in this one
 * process. POST /api/generate answers NDJSON: the first chunk at once, then one chunk every
 * CHUNK_MS until `options.num_predict` chunks (default CHUNKS) have gone, then the `done` line.
 * Nothing is generated: the point is to hold many slow streams open, as an engine does.
 * GET /api/version and /api/tags answer the router's probes; GET /bench/stats tells how many
 * streams this process holds now and at most (`?reset=1` restarts the peak), so the benchmark
 * can see what reached the upstreams.
 * Usage: node bench/stream-upstream-child.js [count] [chunkMs] [chunks]
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exitWithParent, sendReady } from './common.js';

const COUNT = Number(process.argv[2] ?? '2');
const CHUNK_MS = Number(process.argv[3] ?? '100');
const CHUNKS = Number(process.argv[4] ?? '200');

const VERSION = Buffer.from(JSON.stringify({ version: '0.0.0-bench' }));
const TAGS = Buffer.from(JSON.stringify({ models: [{ name: 'm', model: 'm', size: 1 }] }));
// One fixed timestamp: the chunks' content does not matter, their timing does.
const CREATED = '2026-01-01T00:00:00.000Z';
const TOKEN_LINE = Buffer.from(
  JSON.stringify({ model: 'm', created_at: CREATED, response: ' tok', done: false }) + '\n',
);

let active = 0;
let peak = 0;
let total = 0;

function reply(res: ServerResponse, status: number, body: Buffer): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
  res.end(body);
}

/** The number of chunks the request asks for (`options.num_predict`), within [1, 100000]. */
function chunksAsked(body: string): number {
  try {
    const o = JSON.parse(body) as { options?: { num_predict?: unknown } };
    const n = o.options?.num_predict;
    if (typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= 100_000) return n;
  } catch {
    // fall through to the default
  }
  return CHUNKS;
}

function stream(req: IncomingMessage, res: ServerResponse, body: string): void {
  const chunks = chunksAsked(body);
  active++;
  total++;
  if (active > peak) peak = active;
  let sent = 0;
  let finished = false;
  const finish = (): void => {
    if (finished) return;
    finished = true;
    active--;
    clearInterval(timer);
  };
  res.once('close', finish);
  res.writeHead(200, { 'content-type': 'application/x-ndjson' });
  const tick = (): void => {
    if (sent < chunks) {
      res.write(TOKEN_LINE);
      sent++;
      return;
    }
    const last = {
      model: 'm',
      created_at: CREATED,
      response: '',
      done: true,
      done_reason: 'stop',
      prompt_eval_count: 8,
      eval_count: chunks,
    };
    finish();
    res.end(JSON.stringify(last) + '\n');
  };
  const timer = setInterval(tick, CHUNK_MS);
  tick(); // the first chunk at once: time to first byte is the upstream's answer time
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method === 'POST' && path === '/api/generate') {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      body += c;
    });
    req.on('end', () => stream(req, res, body));
    return;
  }
  if (req.method === 'GET' && path === '/api/version') return reply(res, 200, VERSION);
  if (req.method === 'GET' && path === '/api/tags') return reply(res, 200, TAGS);
  if (req.method === 'GET' && path === '/bench/stats') {
    const stats = Buffer.from(JSON.stringify({ active, peak, total }));
    if ((req.url ?? '').includes('reset=1')) {
      peak = active;
      total = 0;
    }
    return reply(res, 200, stats);
  }
  reply(res, 404, Buffer.from('{"error":"not found"}'));
}

async function main(): Promise<void> {
  const servers: Server[] = [];
  const urls: string[] = [];
  for (let i = 0; i < COUNT; i++) {
    const s = createServer(handle);
    s.keepAliveTimeout = 65_000;
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, () => resolve());
    });
    servers.push(s);
    urls.push(`http://127.0.0.1:${(s.address() as AddressInfo).port}`);
  }
  exitWithParent(async () => {
    for (const s of servers) s.closeAllConnections();
    await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  });
  sendReady(urls);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
