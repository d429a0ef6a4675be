import { after, before, describe, test } from 'node:test';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import assert from 'node:assert/strict';
import type { Router } from '../src/proxy/router.js';
import { backend, router, settings, waitFor } from './helpers.js';

/**
 * What llama.cpp's `llama-server` answers a load balancer (no model needed): `/metrics` in its own
 * names when started with `--metrics` (else 501), and `/props` with its slots and context size.
 */
function fakeLlamaServer(withMetrics: boolean): Promise<{ server: Server; url: string; asked: string[] }> {
  const asked: string[] = [];
  const server = createServer((req, res) => {
    asked.push(req.url ?? '');
    if (req.url === '/v1/models') {
      res.setHeader('content-type', 'application/json');
      return void res.end(JSON.stringify({ object: 'list', data: [{ id: 'm1', object: 'model' }] }));
    }
    if (req.url === '/health') return void res.end('{"status":"ok"}');
    if (req.url === '/metrics' && withMetrics)
      return void res.end(
        [
          '# HELP llamacpp:requests_processing Number of requests processing.',
          '# TYPE llamacpp:requests_processing gauge',
          'llamacpp:requests_processing 1',
          'llamacpp:requests_deferred 3',
          'llamacpp:kv_cache_usage_ratio 0.5',
        ].join('\n') + '\n',
      );
    if (req.url === '/metrics') {
      res.statusCode = 501;
      return void res.end(
        '{"error":{"code":501,"message":"This server does not support metrics endpoint."}}',
      );
    }
    if (req.url === '/props') {
      res.setHeader('content-type', 'application/json');
      return void res.end(JSON.stringify({ total_slots: 4, default_generation_settings: { n_ctx: 8192 } }));
    }
    res.statusCode = 404;
    res.end();
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, asked }),
    ),
  );
}

describe("a llama.cpp server's own metrics and /props reach the policy", () => {
  const servers: Server[] = [];
  let r: Router;
  let asked: string[];
  let plainAsked: string[];

  before(async () => {
    const withMetrics = await fakeLlamaServer(true);
    const plain = await fakeLlamaServer(false);
    servers.push(withMetrics.server, plain.server);
    asked = withMetrics.asked;
    plainAsked = plain.asked;
    ({ router: r } = await router(
      settings(
        [backend('l0', withMetrics.url, { api: 'openai' }), backend('l1', plain.url, { api: 'openai' })],
        {
          policy: { name: 'estimated-wait', params: {} },
          health: { failuresToEject: 3, probeIntervalMs: 50, probeTimeoutMs: 500, scrapeIntervalMs: 50 },
        },
      ),
    ));
  });

  after(async () => {
    await r.close();
    await Promise.all(servers.map((s) => new Promise((res) => s.close(res))));
  });

  test('llama-server --metrics: slots busy and deferred requests are the engine load; /props the slot caches', async () => {
    await waitFor(() => r.scheduler.backend('l0')?.metrics?.cache !== undefined, 5000, 'cache info');
    const m = r.scheduler.backend('l0')!.metrics!;
    assert.equal(m.running, 1);
    assert.equal(m.waiting, 3);
    assert.equal(m.kvUsage, 0.5);
    assert.deepEqual(m.cache, { tokens: 4 * 8192, slots: 4 });
    // /props is static: asked once, however many scrapes follow.
    const scrapes = asked.filter((u) => u === '/metrics').length;
    await waitFor(() => asked.filter((u) => u === '/metrics').length >= scrapes + 3, 5000, 'more scrapes');
    assert.equal(asked.filter((u) => u === '/props').length, 1);
  });

  test('without --metrics (501) the backend is not scraped again and carries no engine load', async () => {
    await waitFor(() => plainAsked.includes('/metrics'), 5000, 'a scrape');
    await new Promise((res) => setTimeout(res, 300));
    assert.equal(plainAsked.filter((u) => u === '/metrics').length, 1);
    assert.equal(r.scheduler.backend('l1')?.metrics, undefined);
  });
});
