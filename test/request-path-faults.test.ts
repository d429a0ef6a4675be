// Regressions for the request-path defects a hostile client and a failing fleet found (#16: deep
// JSON leaking a slot, hung backends trapping requests, slow bodies holding sockets).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { backend, engine, hungFleet, post, router, settings, waitFor } from './helpers.js';

/** `{"a":{"a":…}}` nested `depth` levels, built as text (JSON.stringify itself would overflow). */
function deepObject(depth: number): string {
  return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

test('a body nested deeper than server.maxJsonDepth is a 400 and takes no slot', async () => {
  const oa = await engine({ api: 'openai' });
  const { router: r, url } = await router(
    settings([backend('oa', oa.url, { api: 'openai', maxConcurrency: 2 })], {
      server: { host: '127.0.0.1', port: 0, maxBodyBytes: 1 << 20, maxJsonDepth: 64 },
    }),
  );
  try {
    for (const field of ['format', 'tools']) {
      const body = `{"model":"m1","prompt":"x","stream":false,"${field}":${deepObject(10_000)}}`;
      const res = await post(`${url}/api/generate`, body);
      assert.equal(res.status, 400);
      assert.match(((await res.json()) as { error: string }).error, /nested deeper than 64/);
    }
    // Brackets inside strings are text, not nesting.
    const res = await post(`${url}/api/generate`, {
      model: 'm1',
      prompt: '[[[[[[[[[['.repeat(20),
      stream: false,
    });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    assert.equal(r.scheduler.inFlightTotal, 0);
    // The backend capped at 2 still serves: nothing leaked its slots.
    const ok = await Promise.all(
      [1, 2, 3].map(() => post(`${url}/api/chat`, { model: 'm1', messages: [], stream: false })),
    );
    assert.deepEqual(
      ok.map((x) => x.status),
      [200, 200, 200],
    );
  } finally {
    await r.close();
    await oa.close();
  }
});

test('a translation that throws gives its slot back (the one place that owns it)', async () => {
  const oa = await engine({ api: 'openai' });
  // A depth limit high enough to let a stack-overflowing body reach the translation.
  const { router: r, url } = await router(
    settings([backend('oa', oa.url, { api: 'openai', maxConcurrency: 2 })], {
      server: { host: '127.0.0.1', port: 0, maxBodyBytes: 4 << 20, maxJsonDepth: 1_000_000 },
      retry: { attempts: 1, backoffMs: 1 },
    }),
  );
  try {
    for (let i = 0; i < 3; i++) {
      const body = `{"model":"m1","prompt":"x","stream":false,"format":${deepObject(200_000)}}`;
      const res = await post(`${url}/api/generate`, body);
      // JSON.parse or the translation fails: either way a clean error, never a hang.
      assert.ok([400, 502].includes(res.status), `status ${res.status}`);
      await res.arrayBuffer();
    }
    assert.equal(r.scheduler.inFlightTotal, 0, 'no slot left taken');
    const ok = await post(`${url}/api/generate`, { model: 'm1', prompt: 'x', stream: false });
    assert.equal(ok.status, 200);
  } finally {
    await r.close();
    await oa.close();
  }
});

test('a backend that hangs while its probe answers is found stuck, ejected, and its requests retried', async () => {
  const { router: r, url, close } = await hungFleet();
  try {
    const t0 = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        post(`${url}/api/generate`, { model: 'm1', prompt: `q${i}`, stream: i % 2 === 0 }).then(
          async (res) => ({
            status: res.status,
            backend: res.headers.get('x-llmlb-backend'),
            text: await res.text(),
          }),
        ),
      ),
    );
    const took = Date.now() - t0;
    for (const a of answers) {
      assert.equal(a.status, 200);
      assert.equal(a.backend, 'good');
    }
    // Stall limit 1.5 s, checked each second: nothing waits anywhere near the 600 s first-byte timeout.
    assert.ok(took < 6000, `requests took ${took} ms`);
    assert.equal(r.scheduler.backend('hung')?.healthy, false, 'ejected');
    // Its probe still answers, but the quarantine keeps it out.
    await new Promise((res) => setTimeout(res, 400));
    assert.equal(r.scheduler.backend('hung')?.healthy, false, 'kept out while quarantined');
    await waitFor(() => r.scheduler.inFlightTotal === 0, 2000, 'in-flight back to 0');
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /llmlb_backend_ejections_total\{backend="hung"\} 1/);
  } finally {
    await close();
  }
});

test('requests already sent to a backend that gets ejected are retried, not left waiting', async () => {
  const hung = await engine({ faults: { hang: true } });
  const good = await engine();
  const { router: r, url } = await router(
    settings([backend('hung', hung.url), backend('good', good.url)], {
      policy: { name: 'round-robin', params: {} },
      timeouts: { connectMs: 1000, firstByteMs: 600_000, idleMs: 600_000 },
      health: {
        failuresToEject: 1,
        probeIntervalMs: 60_000,
        probeTimeoutMs: 500,
        scrapeIntervalMs: 60_000,
        stallMinMs: 600_000,
      },
    }),
  );
  try {
    const pending = Promise.all(
      [0, 1, 2, 3].map((i) =>
        post(`${url}/api/generate`, { model: 'm1', prompt: `q${i}`, stream: false }).then(async (res) => {
          await res.arrayBuffer();
          return { status: res.status, backend: res.headers.get('x-llmlb-backend') };
        }),
      ),
    );
    await waitFor(
      () => (r.scheduler.backend('hung')?.inFlight ?? 0) >= 2,
      2000,
      'requests on the hung backend',
    );
    // A failure elsewhere ejects it (here: one recorded failure at failuresToEject 1).
    r.fleet.recordFailure('hung', 'test: ejected');
    const answers = await pending;
    for (const a of answers) assert.deepEqual(a, { status: 200, backend: 'good' });
    assert.equal(r.scheduler.inFlightTotal, 0);
  } finally {
    await r.close();
    await Promise.all([hung.close(), good.close()]);
  }
});

test('a client sending its body too slowly gets 408 and its socket closed (timeouts.bodyMs)', async () => {
  const e = await engine();
  const { router: r, url } = await router(
    settings([backend('e', e.url)], {
      timeouts: { connectMs: 1000, firstByteMs: 10_000, idleMs: 10_000, bodyMs: 800 },
    }),
  );
  try {
    const { port } = new URL(url);
    const t0 = Date.now();
    const reply = await new Promise<string>((resolve, reject) => {
      const s = connect(Number(port), '127.0.0.1', () => {
        s.write(
          'POST /api/generate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"mo',
        );
      });
      let got = '';
      s.on('data', (c: Buffer) => (got += c.toString()));
      s.on('close', () => resolve(got));
      s.on('error', reject);
      setTimeout(() => reject(new Error('socket still open after 10 s')), 10_000).unref();
    });
    assert.match(reply, /^HTTP\/1\.1 408/);
    assert.ok(Date.now() - t0 < 5000, `closed after ${Date.now() - t0} ms`);
    assert.equal(r.scheduler.inFlightTotal, 0);
  } finally {
    await r.close();
    await e.close();
  }
});

test('300 streams held at once all reach an uncapped backend, and its probes still answer meanwhile', async () => {
  let open = 0;
  let peak = 0;
  // Streams are held until all 300 are open at once (or 8 s pass): a router that queued some
  // inside itself would show a peak below 300.
  const held: (() => void)[] = [];
  const releaseAll = (): void => {
    for (const f of held.splice(0)) f();
  };
  const giveUp = setTimeout(releaseAll, 8000);
  const up = createServer((req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"version":"0.0.0"}');
      return;
    }
    req.resume();
    open++;
    peak = Math.max(peak, open);
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    res.write('{"response":"a","done":false}\n');
    held.push(() => {
      open--;
      res.end('{"response":"","done":true,"eval_count":1}\n');
    });
    if (open === 300) releaseAll();
  });
  await new Promise<void>((r) => up.listen(0, '127.0.0.1', () => r()));
  const upUrl = `http://127.0.0.1:${(up.address() as AddressInfo).port}`;
  const { router: r, url } = await router(
    settings([backend('only', upUrl)], {
      health: { failuresToEject: 2, probeIntervalMs: 100, probeTimeoutMs: 2000, scrapeIntervalMs: 100 },
    }),
  );
  const agent = new Agent({ connections: null });
  try {
    const answers = await Promise.all(
      Array.from({ length: 300 }, async (_, i) => {
        const res = await request(`${url}/api/generate`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm1', prompt: `q${i}` }),
          dispatcher: agent,
        });
        await res.body.text();
        return res.statusCode;
      }),
    );
    assert.deepEqual(new Set(answers), new Set([200]));
    assert.equal(peak, 300, 'every stream reached the backend at once (none queued inside the router)');
    assert.equal(r.scheduler.backend('only')?.healthy, true, 'probes kept answering: never ejected');
    assert.equal(r.scheduler.inFlightTotal, 0);
  } finally {
    clearTimeout(giveUp);
    await agent.close();
    await r.close();
    up.closeAllConnections();
    await new Promise<void>((res) => up.close(() => res()));
  }
});

test('closing the router (SIGTERM) cuts its requests without counting them as backend failures', async () => {
  const hung = await engine({ faults: { hang: true } });
  const { router: r, url } = await router(
    settings([backend('hung', hung.url)], {
      timeouts: { connectMs: 1000, firstByteMs: 600_000, idleMs: 600_000 },
      health: {
        failuresToEject: 1,
        probeIntervalMs: 60_000,
        probeTimeoutMs: 500,
        scrapeIntervalMs: 60_000,
        stallMinMs: 600_000,
      },
    }),
  );
  try {
    const pending = [0, 1, 2].map((i) =>
      post(`${url}/api/generate`, { model: 'm1', prompt: `q${i}`, stream: false }).then(
        async (res) => res.arrayBuffer(),
        () => undefined, // cut by the close: expected
      ),
    );
    await waitFor(() => (r.scheduler.backend('hung')?.inFlight ?? 0) >= 3, 2000, 'requests on the backend');
    await r.close();
    await Promise.all(pending);
    await new Promise((res) => setTimeout(res, 50));
    // Its pools destroyed by the close, not a failure of the backend: no ejection (was: "backend ejected").
    assert.equal(r.scheduler.backend('hung')?.healthy, true);
  } finally {
    await hung.close();
  }
});
