import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { backend, engine, post, router, settings, waitFor } from './helpers.js';

/** A bare upstream: `generate` answers POST /api/generate; anything else gets `{}` (health probes). */
async function upstream(generate: (req: IncomingMessage, res: ServerResponse) => void): Promise<{
  server: Server;
  url: string;
}> {
  const server = createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/api/generate') {
      req.resume();
      req.on('end', () => generate(req, res));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

const closeServer = (s: Server): Promise<void> =>
  new Promise((r) => {
    s.closeAllConnections();
    s.close(() => r());
  });

test('a client that stops reading pauses the upstream (backpressure), and every byte still arrives', async () => {
  const CHUNK = Buffer.alloc(1 << 20, 'x'); // 1 MiB
  const TOTAL_CHUNKS = 256; // 256 MiB if nothing held the upstream back
  let written = 0;
  const up = await upstream((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    const pump = (): void => {
      while (written < TOTAL_CHUNKS) {
        written++;
        if (!res.write(CHUNK)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  const { router: r, url } = await router(settings([backend('u', up.url)]));
  try {
    const { port } = new URL(url);
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/api/generate',
          headers: { 'content-type': 'application/json' },
        },
        resolve,
      );
      req.on('error', reject);
      req.end(JSON.stringify({ model: 'm1', prompt: 'x' }));
    });
    assert.equal(res.statusCode, 200);
    res.pause(); // a slow client: reads nothing for a while
    await sleep(1000);
    const heldBack = written;
    let received = 0;
    res.on('data', (c: Buffer) => (received += c.length));
    await new Promise<void>((resolve, reject) => {
      res.on('end', resolve);
      res.on('error', reject);
      res.resume();
    });
    // Socket buffers on three hops hold a few MiB; without backpressure llmlb would have read
    // the whole answer into memory by then.
    assert.ok(heldBack < 64, `upstream wrote ${heldBack} MiB while the client read nothing`);
    assert.equal(received, TOTAL_CHUNKS * CHUNK.length);
    await waitFor(() => r.scheduler.inFlightTotal === 0, 2000, 'in-flight back to 0');
  } finally {
    await r.close();
    await closeServer(up.server);
  }
});

test('a backend answering 429 is retried elsewhere, rests for its Retry-After, and is not counted as failing', async () => {
  let busyCalls = 0;
  let firstBusyAt = 0;
  const busy = await upstream((_req, res) => {
    if (busyCalls++ === 0) firstBusyAt = Date.now();
    res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '3' }).end('{"error":"busy"}');
  });
  const ok = await engine();
  const { router: r, url } = await router(
    settings([backend('busy', busy.url), backend('ok', ok.url)], {
      policy: { name: 'round-robin', params: {} },
    }),
  );
  try {
    const ask = async (i: number): Promise<void> => {
      const res = await post(`${url}/api/generate`, { model: 'm1', prompt: `q${i}`, stream: false });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-llmlb-backend'), 'ok');
      assert.equal(((await res.json()) as { done?: boolean }).done, true);
    };
    for (let i = 0; i < 8 && (i === 0 || Date.now() - firstBusyAt < 2500); i++) await ask(i);
    // Round robin alone would send every other request there; resting, it got the first only.
    assert.equal(busyCalls, 1, `the resting backend got ${busyCalls} requests`);
    await sleep(Math.max(0, firstBusyAt + 3100 - Date.now())); // its Retry-After has passed: tried again
    for (let i = 0; i < 2; i++) await ask(100 + i);
    assert.equal(busyCalls, 2);
    assert.equal(r.scheduler.backend('busy')?.healthy, true, 'a 429 is not a failure');
    assert.equal(r.fleet.get('busy')?.failures, 0);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, new RegExp(`llmlb_retries_total\\{backend="busy"\\} ${busyCalls}`));
    assert.equal(r.scheduler.inFlightTotal, 0);
  } finally {
    await r.close();
    await Promise.all([closeServer(busy.server), ok.close()]);
  }
});

test('when every backend answers 429 the client gets 429 with Retry-After, not 502', async () => {
  const full = (after: string) =>
    upstream((_req, res) => {
      res
        .writeHead(429, { 'content-type': 'application/json', 'retry-after': after })
        .end('{"error":"busy"}');
    });
  const [a, b] = await Promise.all([full('3'), full('5')]);
  const { router: r, url } = await router(settings([backend('a', a.url), backend('b', b.url)]));
  try {
    const res = await post(`${url}/api/generate`, { model: 'm1', prompt: 'hi', stream: false });
    assert.equal(res.status, 429);
    assert.equal(res.headers.get('retry-after'), '3', 'the soonest backend back');
    const body = (await res.json()) as { error: string };
    assert.match(body.error, /saturated/);
    // Both rest now: the next request is told to come back without being sent anywhere.
    const again = await post(`${url}/api/generate`, { model: 'm1', prompt: 'x', stream: false });
    assert.equal(again.status, 429);
    assert.ok(Number(again.headers.get('retry-after')) >= 1);
    assert.equal(r.scheduler.inFlightTotal, 0);
  } finally {
    await r.close();
    await Promise.all([closeServer(a.server), closeServer(b.server)]);
  }
});
