/**
 * Trivial Ollama-style upstreams for the proxy benchmark, all in this one process: each answers
 * POST /api/generate with a small non-streamed JSON and GET /api/version (health probes).
 * Usage: node --import tsx bench/upstream-child.ts [count]
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GENERATE_ANSWER, exitWithParent, sendReady } from './common.js';

const ANSWER = Buffer.from(GENERATE_ANSWER);
const VERSION = Buffer.from(JSON.stringify({ version: '0.0.0-bench' }));

function reply(res: ServerResponse, status: number, body: Buffer): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
  res.end(body);
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  if (req.method === 'POST' && req.url === '/api/generate') {
    // Read (and drop) the body before answering, as a real server would.
    req.on('data', () => undefined);
    req.on('end', () => reply(res, 200, ANSWER));
    return;
  }
  if (req.method === 'GET' && req.url === '/api/version') return reply(res, 200, VERSION);
  reply(res, 404, Buffer.from('{"error":"not found"}'));
}

async function main(): Promise<void> {
  const count = Number(process.argv[2] ?? '2');
  const servers: Server[] = [];
  const urls: string[] = [];
  for (let i = 0; i < count; i++) {
    const s = createServer(handle);
    s.keepAliveTimeout = 65_000;
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => resolve());
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
