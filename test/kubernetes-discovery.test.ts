import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDiscovery } from '../src/commands/serve.js';
import { kubernetesDiscoverySchema } from '../src/config/kubernetes-discovery.js';
import { FakeKubeApi } from '../src/fleet/kubernetes/fake-api.testing.js';
import { silentLogger } from '../src/log.js';
import { engine, post, router, settings, waitFor } from './helpers.js';

/**
 * `discovery.kubernetes` in a live router: a fake Kubernetes API serves an InferencePool and its
 * pods; the pods are real engines (one per loopback address, same target port) that the router
 * finds, routes to, keeps across a hot reload, and drops when they turn unready.
 */
test("an InferencePool's ready pods join the fleet, serve traffic, survive a reload and leave when unready", async (t) => {
  const a = await engine({ host: '127.0.0.1', api: 'openai', name: 'a' });
  const port = Number(new URL(a.url).port);
  const b = await engine({ host: '127.0.0.2', port, api: 'openai', name: 'b' });
  const api = new FakeKubeApi('llm');
  await api.start();
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-k8s-'));
  writeFileSync(join(dir, 'token'), 'sa-token');
  const sel = { app: 'vllm' };
  api.setPool('pool', sel, port);
  api.setPod('pod-a', sel, '127.0.0.1', true);
  api.setPod('pod-b', sel, '127.0.0.2', true);
  api.setPod('pod-c', sel, '127.0.0.3', false);
  const s = settings([], { discovery: { refreshMs: 1000 } });
  const { router: r, url } = await router(s);
  const cfg = kubernetesDiscoverySchema.parse({
    inferencePool: 'pool',
    namespace: 'llm',
    apiServer: api.url,
    tokenFile: join(dir, 'token'),
    debounceMs: 20,
    backend: { api: 'openai', models: ['m1'] },
  });
  const d = await startDiscovery(cfg, r, silentLogger());
  t.after(async () => {
    d.stop();
    await r.close();
    await api.close();
    await a.close();
    await b.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const healthy = (n: string): boolean => r.scheduler.backend(n)?.healthy === true;
  await waitFor(() => healthy('pod-a') && healthy('pod-b'), 8000, 'pods healthy in the fleet');
  assert.equal(r.fleet.get('pod-a')?.config.url, `http://127.0.0.1:${port}`);
  assert.equal(r.fleet.get('pod-a')?.origin, 'discovery');
  assert.equal(r.fleet.get('pod-c'), undefined, 'an unready pod is not a backend');
  assert.deepEqual(d.sync.names(), ['pod-a', 'pod-b']);

  const served = async (n: number): Promise<Set<string>> => {
    const seen = new Set<string>();
    await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const res = await post(`${url}/v1/chat/completions`, {
          model: 'm1',
          messages: [{ role: 'user', content: `hello ${i}` }],
          max_tokens: 4,
        });
        assert.equal(res.status, 200);
        await res.arrayBuffer();
        seen.add(res.headers.get('x-llmlb-backend') ?? '?');
      }),
    );
    return seen;
  };
  assert.deepEqual([...(await served(8))].sort(), ['pod-a', 'pod-b']);

  // A hot reload of a config without these backends leaves the discovered ones alone.
  const changes = await r.reconfigure(s);
  assert.ok(!changes.some((c) => c.startsWith('removed')), changes.join('; '));
  assert.ok(r.fleet.get('pod-a') && r.fleet.get('pod-b'));

  // pod-b goes unready: it leaves the fleet and traffic stays on pod-a.
  api.setPod('pod-b', sel, '127.0.0.2', false);
  await waitFor(() => r.fleet.get('pod-b') === undefined, 5000, 'pod-b removed');
  assert.deepEqual([...(await served(4))], ['pod-a']);
  assert.deepEqual(d.sync.names(), ['pod-a']);
});
