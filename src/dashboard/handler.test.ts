import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Dashboard, mainEstimate, type DashboardEvent, type DashboardSource } from './handler.js';
import { LiveStats } from './live-stats.js';

const T0 = 1_700_000_000_000;

function fakeSource(): DashboardSource & { queued: number } {
  return {
    policyName: 'estimated-wait',
    queued: 2,
    get queueLength() {
      return this.queued;
    },
    backendViews: () => [
      {
        name: 'gpu-a',
        healthy: true,
        draining: false,
        inFlight: 3,
        maxConcurrency: 4,
        weight: 1,
        metrics: { running: 3, waiting: 1, kvUsage: 0.5, at: 0 },
      },
      {
        name: 'cpu-b',
        healthy: false,
        draining: false,
        inFlight: 0,
        maxConcurrency: Infinity,
        weight: 1,
        metrics: undefined,
      },
    ],
    describe: (name): Record<string, number> => (name === 'gpu-a' ? { pendingWorkS: 1.5, slots: 4 } : {}),
  };
}

/** Reads server-sent events from a stream, one parsed `data:` payload at a time. */
async function* sse(url: string, signal: AbortSignal): AsyncGenerator<DashboardEvent> {
  const res = await fetch(url, { signal });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  let buf = '';
  const dec = new TextDecoder();
  for await (const chunk of res.body!) {
    buf += dec.decode(chunk as Uint8Array, { stream: true });
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = frame.split('\n').find((l) => l.startsWith('data: '));
      if (data) yield JSON.parse(data.slice(6)) as DashboardEvent;
    }
  }
}

describe('Dashboard handler', () => {
  let server: Server;
  let base: string;
  let dash: Dashboard;
  let clockCalls = 0;
  const stats = new LiveStats();

  before(async () => {
    stats.record({ backend: 'gpu-a', at: T0 - 500, ok: true, latencyMs: 120, ttfbMs: 30, outputTokens: 40 });
    stats.record({ backend: 'cpu-b', at: T0 - 800, ok: false, latencyMs: 3, error: 'connect ECONNREFUSED' });
    dash = new Dashboard(fakeSource(), stats, {
      intervalMs: 40,
      // Every call moves the clock by 1 ms: two pages seeing the same `t` share one snapshot.
      clock: () => T0 + clockCalls++,
      backendErrors: (name) =>
        name === 'cpu-b' ? { lastError: 'probe: status 500', lastErrorAt: T0 - 30_000 } : undefined,
    });
    server = createServer((req, res) => {
      if (!dash.handle(req, res, req.url ?? '/')) {
        res.writeHead(418);
        res.end();
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    dash.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  test('the event carries each backend with engine load, rates, estimates and errors', () => {
    const e = dash.event(true);
    assert.equal(e.policy, 'estimated-wait');
    assert.equal(e.queued, 2);
    const [a, b] = e.backends;
    assert.deepEqual(
      { ...a!, p50LatencyMs: undefined, p95LatencyMs: undefined },
      {
        name: 'gpu-a',
        healthy: true,
        draining: false,
        inFlight: 3,
        maxConcurrency: 4,
        weight: 1,
        engineRunning: 3,
        engineWaiting: 1,
        kvUsage: 0.5,
        requestsPerS: 1,
        errorsPerS: 0,
        tokensPerS: 40,
        uncountedPerS: 0,
        p50LatencyMs: undefined,
        p95LatencyMs: undefined,
        estimate: { kind: 'work', seconds: 1.5 },
        estimates: { pendingWorkS: 1.5, slots: 4 },
        recentErrors: [],
      },
    );
    assert.ok(Math.abs(a!.p50LatencyMs! / 120 - 1) < 0.05);
    assert.equal(b!.maxConcurrency, null, 'no cap is null, not Infinity (JSON has no Infinity)');
    assert.equal(b!.engineWaiting, null);
    assert.equal(b!.estimate, null);
    assert.deepEqual(
      b!.recentErrors.map((x) => x.message),
      ['probe: status 500', 'connect ECONNREFUSED'],
      "the fleet's probe error joins the request errors, in time order",
    );
    assert.equal(e.fleet.completedPerS, 1);
    assert.equal(e.fleet.failedPerS, 1);
    assert.equal(e.fleet.meanTtfbMs, 30);
    assert.equal(e.history?.length, 1);
    assert.equal(dash.event().history, undefined, 'history only for a new page');
  });

  test('page and assets come from the package; other paths are left alone or 404', async () => {
    const page = await fetch(`${base}/dashboard`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type')!, /^text\/html/);
    assert.match(page.headers.get('content-security-policy')!, /default-src 'self'/);
    const html = await page.text();
    assert.match(html, /<script src="dashboard\/uplot.js"><\/script>/);
    assert.doesNotMatch(html, /https?:\/\//, 'nothing loaded from elsewhere');
    const lib = await fetch(`${base}/dashboard/uplot.js`);
    assert.ok((await lib.text()).includes('uPlot'), 'uPlot from node_modules');
    assert.match((await fetch(`${base}/dashboard/uplot.css`)).headers.get('content-type')!, /^text\/css/);
    assert.match(await (await fetch(`${base}/dashboard/app.js`)).text(), /EventSource/);
    const slash = await fetch(`${base}/dashboard/`, { redirect: 'manual' });
    assert.equal(slash.status, 301);
    assert.equal(new URL(slash.headers.get('location')!, `${base}/dashboard/`).pathname, '/dashboard');
    assert.equal((await fetch(`${base}/dashboard/nope.js`)).status, 404);
    assert.equal((await fetch(`${base}/dashboard`, { method: 'POST' })).status, 405);
    assert.equal(
      (await fetch(`${base}/dashboards`)).status,
      418,
      'not the dashboard: handle() returns false',
    );
  });

  test('one timer feeds every page; it stops when the last page leaves', async () => {
    const ac1 = new AbortController();
    const ac2 = new AbortController();
    const s1 = sse(`${base}/dashboard/events`, ac1.signal);
    const s2 = sse(`${base}/dashboard/events`, ac2.signal);
    const first1 = (await s1.next()).value as DashboardEvent;
    const first2 = (await s2.next()).value as DashboardEvent;
    assert.ok(first1.history && first2.history, 'a new page gets the history first');
    assert.equal(dash.subscribers, 2);
    // The next broadcast both pages receive is the same snapshot (one clock read, one JSON).
    const seen1: number[] = [];
    const seen2: number[] = [];
    for (let i = 0; i < 3; i++) {
      seen1.push(((await s1.next()).value as DashboardEvent).t);
      seen2.push(((await s2.next()).value as DashboardEvent).t);
    }
    assert.ok(
      seen1.some((t) => seen2.includes(t)),
      `shared frames: ${seen1} vs ${seen2}`,
    );
    assert.equal((await s1.next()).value?.history, undefined);
    ac1.abort();
    ac2.abort();
    await s1.return(undefined).catch(() => undefined);
    await s2.return(undefined).catch(() => undefined);
    const end = Date.now() + 2000;
    while (dash.subscribers > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    assert.equal(dash.subscribers, 0);
    const calls = clockCalls;
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(clockCalls, calls, 'no snapshots are built with nobody watching');
  });

  test('close() ends open streams', async () => {
    const other = new Dashboard(fakeSource(), new LiveStats(), { intervalMs: 20 });
    const srv = createServer((req, res) => void other.handle(req, res, req.url ?? '/'));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}/dashboard/events`;
    const events = sse(url, new AbortController().signal);
    assert.ok((await events.next()).value);
    other.close();
    let more = 0;
    for await (const _ of events) more++;
    assert.ok(more <= 1, 'the stream ended');
    assert.equal(other.subscribers, 0);
    assert.equal((await fetch(url)).status, 503);
    srv.closeAllConnections();
    await new Promise((r) => srv.close(r));
  });
});

test("a policy's headline estimate", () => {
  assert.deepEqual(mainEstimate({ pendingWorkS: 2.5, slots: 4 }), { kind: 'work', seconds: 2.5 });
  assert.deepEqual(mainEstimate({ waitS: 0.5, pendingWorkS: 2.5 }), { kind: 'wait', seconds: 0.5 });
  assert.deepEqual(
    mainEstimate({ queueChars: 1000, tokenFactor: 0.25, timePerTokenS: 0.02, queueWeight: 2 }),
    { kind: 'wait', seconds: 10 },
  );
  assert.equal(mainEstimate({ queueChars: 1000, tokenFactor: 0.25 }), null, 'untimed yet');
  assert.equal(mainEstimate({}), null);
});
