import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { kubernetesDiscoverySchema } from '../../config/kubernetes-discovery.js';
import type { Endpoint } from './endpoints.js';
import { FakeKubeApi } from './fake-api.testing.js';
import { kubeConfigFor } from './kube-config.js';
import { InferencePoolDiscovery } from './pool-discovery.js';

const log = pino({ level: 'silent' });
const POOL = 'llama';
const sel = { app: 'vllm-llama' };

async function waitFor(cond: () => boolean, what: string, ms = 8000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A fake API server and a discovery pointed at it through a KubeConfig built in code (token file). */
async function setup(t: { after(fn: () => unknown): void }) {
  const api = new FakeKubeApi('ns');
  await api.start();
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-k8s-'));
  writeFileSync(join(dir, 'token'), 'test-token\n');
  const cfg = kubernetesDiscoverySchema.parse({
    inferencePool: POOL,
    namespace: 'ns',
    apiServer: api.url,
    tokenFile: join(dir, 'token'),
  });
  const { kc, namespace } = kubeConfigFor(cfg, {}, join(dir, 'no-service-account'));
  const seen: Endpoint[][] = [];
  const d = new InferencePoolDiscovery(
    kc,
    { namespace, pool: POOL, debounceMs: 20, backoffMs: 20, maxBackoffMs: 100 },
    (eps) => seen.push(eps),
    log,
  );
  t.after(async () => {
    d.stop();
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const last = (): string[] => (seen.at(-1) ?? []).map((e) => `${e.name}=${e.url}`);
  return { api, d, seen, last };
}

test("the pool's ready pods become endpoints (pod name, http://podIP:targetPort); the token is sent", async (t) => {
  const { api, d, seen, last } = await setup(t);
  api.setPool(POOL, sel, 8000);
  api.setPool('other-pool', { app: 'other' }, 9000);
  api.setPod('p-a', sel, '10.0.0.1', true);
  api.setPod('p-b', { ...sel, extra: 'x' }, '10.0.0.2', true);
  api.setPod('p-unready', sel, '10.0.0.3', false);
  api.setPod('p-no-ip', sel, undefined, true);
  api.setPod('p-going', sel, '10.0.0.4', true, { deletionTimestamp: '2026-01-01T00:00:00Z' });
  api.setPod('p-other', { app: 'other' }, '10.0.0.5', true);
  api.setPod('p-v6', sel, 'fd00::7', true);
  d.start();
  await waitFor(() => seen.length > 0, 'first endpoints');
  assert.deepEqual(last(), [
    'p-a=http://10.0.0.1:8000',
    'p-b=http://10.0.0.2:8000',
    'p-v6=http://[fd00::7]:8000',
  ]);
  assert.equal(seen.length, 1, 'one settled update, not one per pod');
  assert.ok(api.requests.every((r) => r.auth === 'Bearer test-token'));
  // Only our pool is listed (field selector) and only its pods (label selector).
  assert.ok(
    api.requests.some(
      (r) => r.kind === 'inferencepools' && r.query.includes('fieldSelector=metadata.name%3Dllama'),
    ),
  );
  assert.ok(
    api.requests.some((r) => r.kind === 'pods' && r.query.includes('labelSelector=app%3Dvllm-llama')),
  );
});

test('a pod turning unready, deleted, or terminating leaves; one turning ready joins', async (t) => {
  const { api, d, seen, last } = await setup(t);
  api.setPool(POOL, sel, 8000);
  api.setPod('p-a', sel, '10.0.0.1', true);
  api.setPod('p-b', sel, '10.0.0.2', true);
  api.setPod('p-c', sel, '10.0.0.3', false);
  d.start();
  await waitFor(() => seen.length > 0 && api.openWatches('pods') === 1, 'watching');
  assert.deepEqual(last(), ['p-a=http://10.0.0.1:8000', 'p-b=http://10.0.0.2:8000']);
  api.setPod('p-a', sel, '10.0.0.1', false);
  await waitFor(() => last().length === 1, 'p-a unready');
  assert.deepEqual(last(), ['p-b=http://10.0.0.2:8000']);
  api.delete('pods', 'p-b');
  await waitFor(() => last().length === 0, 'p-b deleted');
  api.setPod('p-c', sel, '10.0.0.3', true);
  await waitFor(() => last().length === 1, 'p-c ready');
  assert.deepEqual(last(), ['p-c=http://10.0.0.3:8000']);
  api.setPod('p-c', sel, '10.0.0.3', true, { deletionTimestamp: '2026-01-01T00:00:00Z' });
  await waitFor(() => last().length === 0, 'p-c terminating');
  // A pod whose IP changes (recreated under the same name) moves.
  api.setPod('p-d', sel, '10.0.0.9', true);
  await waitFor(() => last().length === 1, 'p-d');
  api.setPod('p-d', sel, '10.0.0.10', true);
  await waitFor(() => last()[0] === 'p-d=http://10.0.0.10:8000', 'p-d moved');
});

test('a watch that ends is restarted from its resourceVersion: no relist, no event lost', async (t) => {
  const { api, d, seen, last } = await setup(t);
  api.setPool(POOL, sel, 8000);
  api.setPod('p-a', sel, '10.0.0.1', true);
  d.start();
  await waitFor(() => seen.length > 0 && api.openWatches('pods') === 1, 'watching');
  const lists = api.lists('pods');
  const watches = api.watches('pods');
  api.endWatches();
  // A change while no watch is open: the restarted watch replays it from the version it had.
  api.setPod('p-b', sel, '10.0.0.2', true);
  await waitFor(() => last().length === 2, 'p-b after the restart');
  await waitFor(
    () => api.openWatches('pods') === 1 && api.openWatches('inferencepools') === 1,
    'watches back',
  );
  assert.equal(api.lists('pods'), lists, 'no relist for a watch that merely ended');
  assert.ok(api.watches('pods') > watches);
  const rv = api.requests.filter((r) => r.kind === 'pods' && r.watch).at(-1)!.query;
  assert.match(rv, /resourceVersion=\d+/);
});

for (const goneAs of ['status', 'event'] as const) {
  test(`410 Gone (${goneAs === 'status' ? 'HTTP 410' : 'an ERROR event'}) relists; what changed meanwhile is picked up`, async (t) => {
    const { api, d, seen, last } = await setup(t);
    api.goneAs = goneAs;
    api.setPool(POOL, sel, 8000);
    api.setPod('p-a', sel, '10.0.0.1', true);
    api.setPod('p-b', sel, '10.0.0.2', true);
    d.start();
    await waitFor(() => seen.length > 0 && api.openWatches('pods') === 1, 'watching');
    const lists = api.lists('pods');
    // History compacted while the watch was down: p-b went and p-c came in the gap.
    api.endWatches();
    api.delete('pods', 'p-b');
    api.setPod('p-c', sel, '10.0.0.3', true);
    api.compact();
    await waitFor(() => api.lists('pods') > lists, 'relist');
    await waitFor(
      () => last().join() === 'p-a=http://10.0.0.1:8000,p-c=http://10.0.0.3:8000',
      'relisted state',
    );
    // And the new watch carries on.
    await waitFor(() => api.openWatches('pods') === 1, 'watching again');
    api.setPod('p-a', sel, '10.0.0.1', false);
    await waitFor(() => last().length === 1, 'event after relist');
  });
}

test('a changed pool selector (or port) re-watches the pods it selects; a deleted pool leaves none', async (t) => {
  const { api, d, seen, last } = await setup(t);
  api.setPool(POOL, sel, 8000);
  api.setPod('old-1', sel, '10.0.0.1', true);
  api.setPod('new-1', { app: 'vllm-llama-v2' }, '10.0.1.1', true);
  api.setPod('new-2', { app: 'vllm-llama-v2' }, '10.0.1.2', true);
  d.start();
  await waitFor(() => seen.length > 0, 'first endpoints');
  assert.deepEqual(last(), ['old-1=http://10.0.0.1:8000']);
  api.setPool(POOL, { app: 'vllm-llama-v2' }, 8001);
  await waitFor(() => last().length === 2, 'new selector');
  assert.deepEqual(last(), ['new-1=http://10.0.1.1:8001', 'new-2=http://10.0.1.2:8001']);
  assert.ok(
    api.requests.some((r) => r.kind === 'pods' && r.query.includes('labelSelector=app%3Dvllm-llama-v2')),
  );
  await waitFor(() => api.openWatches('pods') === 1, 'the old pod watch closed');
  // The old selector's pods no longer count, even when they change.
  api.setPod('old-1', sel, '10.0.0.1', true);
  api.setPod('new-3', { app: 'vllm-llama-v2' }, '10.0.1.3', true);
  await waitFor(() => last().length === 3, 'new-3');
  assert.ok(!last().some((e) => e.startsWith('old-1')));
  // Only the port changes: same pods, new URLs.
  api.setPool(POOL, { app: 'vllm-llama-v2' }, 8002);
  await waitFor(() => last()[0] === 'new-1=http://10.0.1.1:8002', 'port change');
  // Several target ports: each pod is a backend per port.
  api.setPool(POOL, { app: 'vllm-llama-v2' }, [8002, 8003]);
  await waitFor(() => last().length === 6, 'two ports');
  assert.deepEqual(last().slice(0, 2), [
    'new-1:8002=http://10.0.1.1:8002',
    'new-1:8003=http://10.0.1.1:8003',
  ]);
  api.delete('inferencepools', POOL);
  await waitFor(() => last().length === 0, 'pool deleted');
  await waitFor(() => api.openWatches('pods') === 0, 'pod watch stopped');
});

test('failed lists are retried after a backoff; nothing is passed on before a list succeeds', async (t) => {
  const { api, d, seen, last } = await setup(t);
  api.setPool(POOL, sel, 8000);
  api.setPod('p-a', sel, '10.0.0.1', true);
  api.failNextLists(3);
  d.start();
  await waitFor(() => seen.length > 0, 'endpoints after the retries', 10_000);
  assert.deepEqual(
    seen,
    [[{ name: 'p-a', url: 'http://10.0.0.1:8000' }]],
    'no empty list passed on while failing',
  );
  assert.ok(api.lists('inferencepools') + api.lists('pods') >= 4);
  assert.deepEqual(last(), ['p-a=http://10.0.0.1:8000']);
});

test('a missing pool, or one without targetPorts, gives no endpoints (and says why)', async (t) => {
  const { api, d, seen } = await setup(t);
  d.start();
  await waitFor(() => seen.length > 0, 'empty endpoints');
  assert.deepEqual(seen, [[]]);
  api.setPool(POOL, sel, 8000);
  api.setPod('p-a', sel, '10.0.0.1', true);
  await waitFor(() => seen.at(-1)!.length === 1, 'pool created');
});
