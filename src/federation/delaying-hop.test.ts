import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type Server } from 'node:net';
import { performance } from 'node:perf_hooks';
import { startDelayingHop } from './delaying-hop.js';

async function echoServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((s) => s.pipe(s));
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return { server, port: (server.address() as { port: number }).port };
}

/** Sends `text` through the hop and resolves with what came back and after how long (ms). */
function roundTrip(
  port: number,
  text: string,
  onConnected?: () => void,
): Promise<{ got: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const c = connect(port, '127.0.0.1', () => {
      c.write(text);
      onConnected?.();
    });
    let got = '';
    c.on('data', (b: Buffer) => {
      got += b.toString();
      if (got.length >= text.length) {
        c.destroy();
        resolve({ got, ms: performance.now() - t0 });
      }
    });
    c.on('error', reject);
  });
}

test('a hop delays each way and carries bytes through', async () => {
  const echo = await echoServer();
  const hop = await startDelayingHop(echo.port, 30);
  try {
    const r = await roundTrip(hop.port, 'hello');
    assert.equal(r.got, 'hello');
    assert.ok(r.ms >= 55, `round trip ${r.ms} ms`);
  } finally {
    await hop.close();
    echo.server.close();
  }
});

test('a hop without a target holds connections and their bytes until it gets one', async () => {
  const echo = await echoServer();
  const hop = await startDelayingHop(0, 1);
  try {
    // Written while the hop has nowhere to go: kept, then delivered once the target is set.
    const r = await roundTrip(hop.port, 'early bytes', () => setTimeout(() => (hop.target = echo.port), 40));
    assert.equal(r.got, 'early bytes');
    assert.ok(r.ms >= 40, `round trip ${r.ms} ms`);
    assert.equal(hop.target, echo.port);
  } finally {
    await hop.close();
    echo.server.close();
  }
});
