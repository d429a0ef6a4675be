import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backend, engine, fastProfile, post, router, settings, waitFor } from './helpers.js';

test('a backend killed mid-run loses no non-streamed request', async () => {
  const dying = await engine({ faults: { exitAfter: 4 } });
  const ok = await engine();
  const { router: r, url } = await router(settings([backend('dying', dying.url), backend('ok', ok.url)]));
  try {
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        post(
          `${url}/api/generate`,
          { model: 'm1', prompt: `q${i}`, stream: false },
          { 'x-llmlb-output-tokens': '3' },
        ).then(async (res) => ({ status: res.status, body: (await res.json()) as { done?: boolean } })),
      ),
    );
    assert.deepEqual(
      results.map((x) => x.status),
      Array(30).fill(200),
    );
    assert.ok(results.every((x) => x.body.done === true));
    await waitFor(() => r.scheduler.inFlightTotal === 0, 2000, 'in-flight back to 0');
    for (const v of r.scheduler.backendViews()) assert.equal(v.inFlight, 0);
    await waitFor(() => r.scheduler.backend('dying')?.healthy === false, 3000, 'dead backend ejected');
  } finally {
    await r.close();
    await Promise.all([dying.close(), ok.close()]);
  }
});

test('a hanging backend is timed out and the request retried elsewhere', async () => {
  const hang = await engine({ faults: { hang: true } });
  const ok = await engine();
  const { router: r, url } = await router(
    settings([backend('hang', hang.url), backend('ok', ok.url)], {
      policy: { name: 'round-robin', params: {} },
      timeouts: { connectMs: 1000, firstByteMs: 200, idleMs: 1000 },
    }),
  );
  try {
    const statuses: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await post(`${url}/api/generate`, { model: 'm1', prompt: 'x', stream: false });
      statuses.push(`${res.status}:${res.headers.get('x-llmlb-backend')}`);
      await res.arrayBuffer();
    }
    assert.deepEqual(statuses, Array(4).fill('200:ok'));
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /llmlb_retries_total\{backend="hang"\} [1-9]/);
    assert.equal(r.scheduler.inFlightTotal, 0);
  } finally {
    await r.close();
    await Promise.all([hang.close(), ok.close()]);
  }
});

test('a backend dying mid-stream ends the client stream with an error chunk, no hang', async () => {
  const e = await engine({
    faults: { dieMidStreamAfterChunks: 3 },
    profile: fastProfile({ baseStepS: 0.005 }),
  });
  const { router: r, url } = await router(settings([backend('e', e.url)]));
  try {
    const res = await post(
      `${url}/api/generate`,
      { model: 'm1', prompt: 'x', stream: true },
      { 'x-llmlb-output-tokens': '50' },
    );
    assert.equal(res.status, 200);
    const lines = (await res.text()).trim().split('\n');
    const last = JSON.parse(lines[lines.length - 1]!) as { error?: string; done?: boolean };
    assert.match(last.error ?? '', /failed mid-stream/);
    const sse = await post(
      `${url}/v1/chat/completions`,
      { model: 'm1', messages: [{ role: 'user', content: 'x' }], stream: true },
      { 'x-llmlb-output-tokens': '50' },
    );
    const text = await sse.text();
    assert.match(text, /data: \{"error":\{"message":"upstream e failed mid-stream/);
    await waitFor(() => r.scheduler.inFlightTotal === 0, 2000, 'in-flight back to 0');
  } finally {
    await r.close();
    await e.close();
  }
});

test('consecutive failures eject a backend; probes re-admit it', async () => {
  const bad = await engine();
  const ok = await engine();
  const { router: r, url } = await router(
    settings([backend('bad', bad.url), backend('ok', ok.url)], {
      policy: { name: 'round-robin', params: {} },
    }),
  );
  // Broken after its first probe: a backend failing from the start is never admitted at all.
  bad.setFaults({ failRate: 1 });
  try {
    for (let i = 0; i < 8; i++) {
      const res = await post(`${url}/api/generate`, { model: 'm1', prompt: 'x', stream: false });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-llmlb-backend'), 'ok');
      await res.arrayBuffer();
    }
    assert.equal(r.scheduler.backend('bad')?.healthy, false);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /llmlb_backend_ejections_total\{backend="bad"\} 1/);
    bad.setFaults({ failRate: 0 });
    await waitFor(() => r.scheduler.backend('bad')?.healthy === true, 3000, 're-admission');
  } finally {
    await r.close();
    await Promise.all([bad.close(), ok.close()]);
  }
});

test('with every backend down the client gets a 502/503 in its API format, counters at 0', async () => {
  const e = await engine();
  const { router: r, url } = await router(
    settings([backend('e', e.url)], { retry: { attempts: 2, backoffMs: 1 } }),
  );
  e.setFaults({ failRate: 1 }); // after its first probe admitted it
  try {
    const res = await post(`${url}/v1/chat/completions`, { model: 'm1', messages: [] });
    assert.equal(res.status, 502);
    const j = (await res.json()) as { error: { message: string; type: string } };
    assert.equal(j.error.type, 'server_error');
    await e.close();
    // after ejection: no eligible backend → 503
    for (let i = 0; i < 3; i++)
      await (await post(`${url}/api/generate`, { model: 'm1', prompt: 'x' })).arrayBuffer();
    await waitFor(() => r.scheduler.backend('e')?.healthy === false, 3000, 'ejection');
    const down = await post(`${url}/api/generate`, { model: 'm1', prompt: 'x' });
    assert.equal(down.status, 503);
    assert.match(((await down.json()) as { error: string }).error, /no healthy backend/);
    assert.equal(r.scheduler.inFlightTotal, 0);
  } finally {
    await r.close();
  }
});
