/**
 * `llmlb demo --regions 3` as the CLI starts it (minus the printing): three routers with their
 * engines and delaying hops on loopback; a request to a full region is answered by another one.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { REPLICAS_PER_REGION, startRegionsDemo, type RegionsDemo } from './demo-regions.js';

const ONE_WAY_MS = 40;

async function waitFor(cond: () => boolean, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const generate = (url: string, prompt: string, tokens: number): Promise<Response> =>
  fetch(`${url}/api/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-llmlb-output-tokens': String(tokens) },
    body: JSON.stringify({ model: 'llama3', prompt, stream: false }),
  });

describe('llmlb demo --regions 3', () => {
  let demo: RegionsDemo;

  before(async () => {
    demo = await startRegionsDemo({ port: 0, regions: 3, oneWayMs: ONE_WAY_MS, quiet: true });
  });

  after(async () => {
    await demo.close();
  });

  it('starts a router per region, each with its replicas, each hearing from both peers', async () => {
    assert.deepEqual(
      demo.routers.map((r) => r.region),
      ['us', 'eu', 'asia'],
    );
    for (const r of demo.routers) {
      assert.equal(r.engines.length, REPLICAS_PER_REGION);
      await waitFor(() => r.router.peers!.available(Date.now()).length === 2, `${r.region} probes`);
    }
  });

  it('serves locally while a replica is free, and forwards once the region is full', async () => {
    const us = demo.routers[0]!;
    const local = await generate(us.url, 'hello', 4);
    assert.equal(local.status, 200, await local.clone().text());
    assert.match(local.headers.get('x-llmlb-backend') ?? '', /^us-/);
    await local.text();

    // Fill both us replicas (one request at a time each) with long answers.
    const long = [1, 2].map((i) => generate(us.url, `long ${i}`, 100));
    await waitFor(
      () => ['us-0', 'us-1'].every((b) => us.router.scheduler.backend(b)!.inFlight === 1),
      'us full',
    );
    await waitFor(() => us.router.peerStatus().availableReplicas === 0, 'us unavailable');
    await waitFor(() => us.router.peers!.available(Date.now()).length > 0, 'a peer available');
    const t0 = Date.now();
    const r = await generate(us.url, 'Why is the sky blue?', 4);
    assert.equal(r.status, 200);
    const served = r.headers.get('x-llmlb-backend') ?? '';
    assert.match(served, /^(eu|asia)-[01]$/, `served by ${served}`);
    const body = (await r.json()) as { done: boolean; response: string };
    assert.equal(body.done, true);
    assert.ok(Date.now() - t0 >= 2 * ONE_WAY_MS, 'paid the round trip through the hop');
    const fwd = us.router.peers!.describe(Date.now());
    assert.equal(
      fwd.reduce((a, p) => a + p.forwarded, 0),
      1,
    );
    for (const p of await Promise.all(long)) {
      assert.equal(p.status, 200);
      assert.match(p.headers.get('x-llmlb-backend') ?? '', /^us-/);
      await p.text();
    }
  });

  it('stops: every router, hop and engine lets go of its port', async () => {
    const urls = demo.routers.flatMap((r) => [r.url, ...r.engines]);
    await demo.close();
    for (const u of urls) await assert.rejects(fetch(`${u}/`), `${u} still answers`);
  });
});
