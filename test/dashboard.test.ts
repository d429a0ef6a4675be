import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';
import type { EngineServer } from '../src/engine/server.js';
import type { Router } from '../src/proxy/router.js';
import { backend, engine, fastProfile, post, router, settings } from './helpers.js';

const CHROMIUM = '/usr/bin/chromium';

describe('dashboard', () => {
  let engines: EngineServer[];
  let r: Router;
  let url: string;
  let load: NodeJS.Timeout;

  before(async () => {
    engines = await Promise.all([
      engine({ profile: fastProfile({ baseStepS: 0.01 }) }),
      engine({ profile: fastProfile({ baseStepS: 0.03 }) }),
      engine({ profile: fastProfile({ baseStepS: 0.05 }) }),
    ]);
    ({ router: r, url } = await router(settings(engines.map((e, i) => backend(`gpu-${i}`, e.url)))));
    // A little steady traffic so counters and charts move.
    load = setInterval(() => {
      void post(
        `${url}/api/generate`,
        { model: 'm1', prompt: 'hello', stream: false },
        { 'x-llmlb-output-tokens': '8' },
      )
        .then((res) => res.arrayBuffer())
        .catch(() => undefined);
    }, 50);
  });
  after(async () => {
    clearInterval(load);
    await r.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('the event stream carries every backend with its load and rates', async () => {
    const ac = new AbortController();
    const res = await fetch(`${url}/dashboard/events`, { signal: ac.signal });
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const reader = res.body!.getReader();
    const { value } = await reader.read();
    ac.abort();
    const text = new TextDecoder().decode(value);
    const snap = JSON.parse(text.slice(text.indexOf('data: ') + 6).split('\n')[0]!) as {
      policy: string;
      backends: { name: string; healthy: boolean; inFlight: number }[];
    };
    assert.equal(snap.policy, 'least-connections');
    assert.deepEqual(
      snap.backends.map((b) => b.name),
      ['gpu-0', 'gpu-1', 'gpu-2'],
    );
    const page = await fetch(`${url}/dashboard`);
    assert.match(await page.text(), /<script src="\/dashboard\/uplot.js">/);
    const lib = await fetch(`${url}/dashboard/uplot.js`);
    assert.equal(lib.status, 200);
    assert.ok((await lib.text()).length > 10_000, 'uPlot is served from the package');
    assert.equal((await fetch(`${url}/dashboard/nope`)).status, 404);
  });

  test('headless Chromium shows the backends and a chart that updates', async (t) => {
    if (!existsSync(CHROMIUM)) {
      if (process.env.CI) assert.fail(`${CHROMIUM} is missing: .ci/run installs Debian's chromium`);
      t.skip('chromium not installed on this machine');
      return;
    }
    const browser = await chromium.launch({
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
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await page.goto(`${url}/dashboard`);
      await page.waitForSelector('tr[data-backend="gpu-2"]', { timeout: 10_000 });
      const names = await page.$$eval('tr[data-backend]', (rows) =>
        rows.map((r) => r.getAttribute('data-backend')),
      );
      assert.deepEqual(names, ['gpu-0', 'gpu-1', 'gpu-2']);
      const points = (): Promise<number> =>
        page.evaluate(() =>
          (globalThis as unknown as { __llmlbDashboard: { points(): number } }).__llmlbDashboard.points(),
        );
      const first = await points();
      await page.waitForFunction(
        (n) =>
          (globalThis as unknown as { __llmlbDashboard: { points(): number } }).__llmlbDashboard.points() >=
          n + 2,
        first,
        { timeout: 10_000 },
      );
      assert.ok((await points()) >= first + 2, 'the charts received new points');
      assert.equal(await page.locator('.uplot').count(), 3);
      mkdirSync('out', { recursive: true });
      await page.screenshot({ path: 'out/dashboard.png', fullPage: true });
    } finally {
      await browser.close();
    }
  });
});
