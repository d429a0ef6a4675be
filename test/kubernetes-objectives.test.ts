import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDiscovery } from '../src/commands/serve.js';
import { kubernetesDiscoverySchema } from '../src/config/kubernetes-discovery.js';
import { FakeKubeApi } from '../src/fleet/kubernetes/fake-api.testing.js';
import { silentLogger } from '../src/log.js';
import { backend, engine, post, router, settings, waitFor } from './helpers.js';

/**
 * `discovery.kubernetes` in a live router: the InferenceObjectives (llm-d.ai/v1alpha2) naming the
 * pool set the priority a request gets from its x-gateway-inference-objective header, over the
 * config's `objectives`. Asserted through the router queue: a backend capped at one request,
 * held requests released highest priority first.
 */
test('InferenceObjectives from Kubernetes (created, updated, deleted; other pools ignored) order the router queue', async (t) => {
  const e = await engine({ profile: (await import('./helpers.js')).fastProfile({ baseStepS: 0.01 }) });
  const api = new FakeKubeApi('llm');
  await api.start();
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-k8s-'));
  writeFileSync(join(dir, 'token'), 'sa-token');
  api.setPool('pool', { app: 'vllm' }, 8000); // no pods: the static backend serves
  api.setObjective('critical', { name: 'pool' }, 20); // over the config's 1
  api.setObjective('gold', { name: 'pool' }, 10);
  api.setObjective('foreign', { name: 'other-pool' }, 100); // another pool's: ignored
  const { router: r, url } = await router(
    settings([backend('e', e.url, { maxConcurrency: 1 })], {
      objectives: { critical: { priority: 1 }, silver: { priority: 5 } },
    }),
  );
  const cfg = kubernetesDiscoverySchema.parse({
    inferencePool: 'pool',
    namespace: 'llm',
    apiServer: api.url,
    tokenFile: join(dir, 'token'),
    debounceMs: 20,
  });
  const d = await startDiscovery(cfg, r, silentLogger());
  t.after(async () => {
    d.stop();
    await r.close();
    await api.close();
    await e.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const prio = (o: string): number | undefined => r.objectives.priority(r.settings.objectives, o);

  /** One request holds the backend; the rest queue in the order given; the order they finish in. */
  const round = async (objectives: Array<string | undefined>): Promise<string[]> => {
    const done: string[] = [];
    const send = (name: string, objective: string | undefined, tokens: number) =>
      post(
        `${url}/api/generate`,
        { model: 'm1', prompt: name, stream: false },
        {
          'x-llmlb-output-tokens': String(tokens),
          ...(objective ? { 'x-gateway-inference-objective': objective } : {}),
        },
      ).then(async (x) => {
        await x.text();
        assert.equal(x.status, 200);
        done.push(name);
      });
    const first = send('first', undefined, 40);
    await waitFor(() => r.scheduler.inFlightTotal === 1, 2000, 'first in flight');
    const rest: Array<Promise<void>> = [];
    for (const [i, o] of objectives.entries()) {
      rest.push(send(o ?? 'plain', o, 2));
      await waitFor(() => r.scheduler.queueLength === i + 1, 2000, `${o ?? 'plain'} queued`);
    }
    await Promise.all([first, ...rest]);
    return done.slice(1);
  };

  await waitFor(() => prio('gold') === 10, 8000, 'objectives discovered');
  assert.equal(prio('critical'), 20, 'the discovered objective wins over the config');
  assert.equal(prio('silver'), 5, 'the config is the fallback');
  assert.equal(prio('foreign'), undefined);
  assert.deepEqual(await round([undefined, 'foreign', 'silver', 'gold', 'critical']), [
    'critical',
    'gold',
    'silver',
    'plain',
    'foreign',
  ]);

  // Updated, deleted (back to the config's priority) and created: the next requests see it.
  api.setObjective('gold', { name: 'pool' }, -5);
  api.delete('inferenceobjectives', 'critical');
  api.setObjective('platinum', { name: 'pool' }, 30);
  await waitFor(
    () => prio('platinum') === 30 && prio('gold') === -5 && prio('critical') === 1,
    8000,
    'changes',
  );
  assert.deepEqual(await round(['gold', undefined, 'critical', 'platinum', 'silver']), [
    'platinum',
    'silver',
    'critical',
    'plain',
    'gold',
  ]);
});
