// The dashboard of a running router, end to end: three emulated engines of unequal speed, a real
// Router with traffic going through it, and the page opened in headless Chromium (Debian's, driven
// by playwright-core; never a downloaded browser).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { chromium, type Page } from 'playwright-core';
import type { DashboardEvent } from '../src/dashboard/handler.js';
import type { EngineServer } from '../src/engine/server.js';
import type { Router } from '../src/proxy/router.js';
import { backend, engine, fastProfile, post, router, settings } from './helpers.js';

const CHROMIUM = '/usr/bin/chromium';
const NAMES = ['gpu-fast', 'gpu-slow', 'cpu-slowest'];

interface PageHooks {
  __llmlbDashboard: {
    points(): number;
    fleetPoints(): number;
    backends(): string[];
    last(): DashboardEvent | undefined;
    xRanges(): ([number, number] | null)[];
  };
}

const launch = () =>
  chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });

const xRanges = (p: Page) =>
  p.evaluate(() => (globalThis as unknown as PageHooks).__llmlbDashboard.xRanges());

/** Every chart's time axis is a recent stretch ending about now (not years away), at least a minute wide. */
function assertRecentAxes(ranges: ([number, number] | null)[], what: string): void {
  assert.equal(ranges.length, 3, what);
  const nowS = Date.now() / 1000;
  for (const r of ranges) {
    assert.ok(r !== null, `${what}: every chart exists`);
    const [min, max] = r;
    assert.ok(Number.isFinite(min) && Number.isFinite(max), `${what}: finite axis ${min}..${max}`);
    assert.ok(
      Math.abs(max - nowS) < 120,
      `${what}: axis ends near now (${new Date(max * 1000).toISOString()})`,
    );
    assert.ok(max - min >= 59 && max - min <= 400, `${what}: axis spans ${max - min} s`);
  }
}

describe('dashboard', () => {
  let engines: EngineServer[];
  let r: Router;
  let url: string;
  let load: NodeJS.Timeout;
  let sent = 0;

  before(async () => {
    engines = await Promise.all([
      engine({ name: NAMES[0], profile: fastProfile({ baseStepS: 0.005 }) }),
      engine({ name: NAMES[1], profile: fastProfile({ baseStepS: 0.02 }) }),
      engine({ name: NAMES[2], profile: fastProfile({ baseStepS: 0.06, slots: 2 }) }),
    ]);
    ({ router: r, url } = await router(
      settings(
        engines.map((e, i) => backend(NAMES[i]!, e.url)),
        { policy: { name: 'estimated-wait', params: {} } },
      ),
    ));
    // Steady traffic, streamed and not, so counters, queues and charts move.
    load = setInterval(() => {
      const stream = sent++ % 2 === 0;
      void post(
        `${url}/api/generate`,
        { model: 'm1', prompt: `hello number ${sent}`, stream },
        { 'x-llmlb-output-tokens': String(4 + ((sent * 7) % 21)) },
      )
        .then((res) => res.arrayBuffer())
        .catch(() => undefined);
    }, 25);
  });
  after(async () => {
    clearInterval(load);
    await r.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('the router serves the page, its assets and an event stream of every backend', async () => {
    const page = await fetch(`${url}/dashboard`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<script src="dashboard\/uplot.js">/);
    const lib = await fetch(`${url}/dashboard/uplot.js`);
    assert.equal(lib.status, 200);
    assert.ok((await lib.text()).length > 10_000, 'uPlot is served from the package');
    assert.equal((await fetch(`${url}/dashboard/nope`)).status, 404);

    const ac = new AbortController();
    const res = await fetch(`${url}/dashboard/events`, { signal: ac.signal });
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('\n\n')) text += new TextDecoder().decode((await reader.read()).value);
    ac.abort();
    const data = text.split('\n').find((l) => l.startsWith('data: '))!;
    const snap = JSON.parse(data.slice(6)) as DashboardEvent;
    assert.equal(snap.policy, 'estimated-wait');
    assert.deepEqual(
      snap.backends.map((b) => b.name),
      NAMES,
    );
    for (const b of snap.backends) {
      assert.equal(b.healthy, true);
      assert.equal(typeof b.inFlight, 'number');
      assert.equal(b.maxConcurrency, null);
      assert.ok(Array.isArray(b.recentErrors));
    }
    assert.ok(Array.isArray(snap.history), 'a new page gets the fleet history first');
  });

  test('headless Chromium shows the backends, fills the table and updates the charts', async () => {
    // Missing Chromium fails the test, here as in CI: a skip would drop it silently.
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium (.ci/run does)`);
    const browser = await launch();
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 960 } });
      const problems: string[] = [];
      page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
      page.on('console', (m) => {
        if (m.type() === 'error') problems.push(`console: ${m.text()} (${m.location().url})`);
      });
      page.on('request', (req) => {
        if (!req.url().startsWith(url)) problems.push(`request outside the router: ${req.url()}`);
      });

      await page.goto(`${url}/dashboard`);
      await page.waitForSelector(`tr[data-backend="${NAMES[2]}"]`, { timeout: 10_000 });
      const rows = await page.$$eval('tr[data-backend]', (trs) =>
        trs.map((tr) => tr.getAttribute('data-backend')),
      );
      assert.deepEqual(rows, NAMES);
      assert.equal(await page.locator('#policy').textContent(), 'estimated-wait');
      assert.equal(await page.locator('#status').textContent(), 'live');
      assert.equal(await page.locator('#notice').isVisible(), false);
      assertRecentAxes(await xRanges(page), 'with traffic');

      // Rates reach the table once requests complete.
      await page.waitForFunction(
        () => {
          const e = (globalThis as unknown as PageHooks).__llmlbDashboard.last();
          return e !== undefined && e.backends.some((b) => b.requestsPerS > 0 && b.tokensPerS > 0);
        },
        undefined,
        { timeout: 10_000 },
      );
      const tokensCell = await page.locator(`tr[data-backend="${NAMES[0]}"] td`).nth(6).textContent();
      assert.ok(Number(tokensCell) > 0, `tokens/s for ${NAMES[0]}: ${tokensCell}`);

      // The charts grow with every event.
      const hooks = (p: Page) =>
        p.evaluate(() => {
          const d = (globalThis as unknown as PageHooks).__llmlbDashboard;
          return { points: d.points(), fleet: d.fleetPoints(), backends: d.backends() };
        });
      const first = await hooks(page);
      assert.deepEqual(first.backends, NAMES, 'one queue series per backend');
      await page.waitForFunction(
        (n) => (globalThis as unknown as PageHooks).__llmlbDashboard.points() >= n + 2,
        first.points,
        { timeout: 10_000 },
      );
      const second = await hooks(page);
      assert.ok(second.points >= first.points + 2, 'the queue chart received new points');
      assert.ok(second.fleet > first.fleet, 'the throughput and latency charts received new seconds');
      assert.equal(await page.locator('.uplot').count(), 3);
      // Queue chart: in flight and engine queue per backend, plus the router queue.
      assert.equal(await page.locator('#chart-queues .u-legend .u-series').count(), 1 + NAMES.length * 2 + 1);

      mkdirSync('out', { recursive: true });
      await page.screenshot({ path: 'out/dashboard.png', fullPage: true });
      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
    }
  });
});

describe('dashboard behind an admin token', () => {
  let e: EngineServer;
  let r: Router;
  let url: string;
  before(async () => {
    e = await engine({ name: 'only' });
    ({ router: r, url } = await router(
      settings([backend('only', e.url)], { admin: { token: 's3cret-token', listen: undefined } }),
    ));
  });
  after(async () => {
    await r.close();
    await e.close();
  });

  test('without its token: says how to open it, stops asking, and still draws sane empty charts', async () => {
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium (.ci/run does)`);
    const browser = await launch();
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 960 } });
      const errors: string[] = [];
      page.on('pageerror', (x) => errors.push(x.message));
      let streamRequests = 0;
      page.on('request', (req) => {
        if (new URL(req.url()).pathname.endsWith('/dashboard/events')) streamRequests++;
      });

      await page.goto(`${url}/dashboard`);
      await page.locator('#notice').waitFor({ state: 'visible', timeout: 10_000 });
      const text = await page.locator('#notice').textContent();
      assert.match(text ?? '', /needs the router’s admin token/);
      assert.ok(text?.includes(`${url}/dashboard?token=<admin.token>`), text ?? '');
      assert.equal(await page.locator('#status').textContent(), 'needs the admin token');
      // The first frame has no data: each time axis is still the last minute, not an arbitrary span.
      assertRecentAxes(await xRanges(page), 'no data');
      // It gave up: no reconnection loop (one stream attempt, one HEAD to learn why).
      const asked = streamRequests;
      assert.ok(asked <= 2, `${asked} requests to the event stream`);
      await page.waitForTimeout(2500); // longer than the stream's retry (2 s): a retry would show
      assert.equal(streamRequests, asked, 'no retry after a 401');

      // A wrong token says so; the right one goes live and hides the notice.
      await page.goto(`${url}/dashboard?token=wrong`);
      await page.locator('#notice').waitFor({ state: 'visible', timeout: 10_000 });
      assert.match((await page.locator('#notice').textContent()) ?? '', /is not this router’s admin token/);
      // A generation that finished without a token count (an OpenAI stream without usage).
      r.stats.record({ backend: 'only', at: Date.now() - 1500, ok: true, latencyMs: 5 });
      await page.goto(`${url}/dashboard?token=s3cret-token`);
      await page.waitForSelector('tr[data-backend="only"]', { timeout: 10_000 });
      const tokensCell = page.locator('tr[data-backend="only"] td').nth(6);
      assert.equal(await tokensCell.textContent(), 'uncounted', 'not 0 tokens/s');
      assert.match((await tokensCell.getAttribute('title')) ?? '', /without a token count/);
      assert.equal(await page.locator('#status').textContent(), 'live');
      assert.equal(await page.locator('#notice').isVisible(), false);
      assertRecentAxes(await xRanges(page), 'first event, no traffic');
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
    }
  });
});
