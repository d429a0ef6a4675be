/**
 * Reference point: the smallest useful Node reverse proxy (node:http in, one undici Pool per
 * upstream out, least-connections), to tell Node's own HTTP cost from llmlb's.
 * Usage: node --import tsx bench/min-proxy-child.ts URL...
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { exitWithParent, sendReady } from './common.js';

async function main(): Promise<void> {
  const ups = process.argv.slice(2).map((url) => ({ pool: new Pool(url, { connections: 256 }), busy: 0 }));
  if (ups.length === 0) throw new Error('usage: min-proxy-child.ts UPSTREAM_URL...');
  const server = createServer((req, res) => {
    let up = ups[0]!;
    for (const u of ups) if (u.busy < up.busy) up = u;
    up.busy++;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      up.pool
        .request({
          path: req.url ?? '/',
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: Buffer.concat(chunks),
        })
        .then((r) => {
          const h: Record<string, string> = {};
          const ct = r.headers['content-type'];
          if (typeof ct === 'string') h['content-type'] = ct;
          res.writeHead(r.statusCode, h);
          r.body.on('data', (c: Buffer) => res.write(c));
          r.body.on('end', () => {
            up.busy--;
            res.end();
          });
        })
        .catch(() => {
          up.busy--;
          res.writeHead(502).end();
        });
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  exitWithParent(async () => {
    server.closeAllConnections();
    await Promise.all(ups.map((u) => u.pool.destroy()));
  });
  sendReady([`http://127.0.0.1:${(server.address() as AddressInfo).port}`]);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
