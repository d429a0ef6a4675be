import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { kubernetesDiscoverySchema } from '../../config/kubernetes-discovery.js';
import { FakeKubeApi } from './fake-api.testing.js';
import { kubeConfigFor } from './kube-config.js';
import { InferenceObjectiveDiscovery, objectivePriorityOf } from './objective-discovery.js';

const log = pino({ level: 'silent' });
const POOL = 'llama';

async function waitFor(cond: () => boolean, what: string, ms = 8000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const obj = (spec: unknown) => ({ metadata: { name: 'o' }, spec }) as never;

test('objectivePriorityOf: poolRef names this pool (group/kind defaulted), priority absent = 0', () => {
  assert.equal(objectivePriorityOf(obj({ poolRef: { name: POOL }, priority: 7 }), POOL), 7);
  assert.equal(objectivePriorityOf(obj({ poolRef: { name: POOL } }), POOL), 0);
  assert.equal(
    objectivePriorityOf(
      obj({
        poolRef: { name: POOL, group: 'inference.networking.k8s.io', kind: 'InferencePool' },
        priority: -3,
      }),
      POOL,
    ),
    -3,
  );
  assert.equal(objectivePriorityOf(obj({ poolRef: { name: 'other' }, priority: 7 }), POOL), undefined);
  assert.equal(
    objectivePriorityOf(obj({ poolRef: { name: POOL, group: 'x.io' }, priority: 7 }), POOL),
    undefined,
  );
  assert.equal(
    objectivePriorityOf(obj({ poolRef: { name: POOL, kind: 'Service' }, priority: 7 }), POOL),
    undefined,
  );
  assert.equal(objectivePriorityOf(obj({ poolRef: { name: POOL }, priority: 1.5 }), POOL), undefined);
  assert.equal(objectivePriorityOf(obj({ poolRef: { name: POOL }, priority: '1' }), POOL), undefined);
  assert.equal(objectivePriorityOf(obj({ priority: 1 }), POOL), undefined);
  assert.equal(objectivePriorityOf(obj(undefined), POOL), undefined);
});

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
  const seen: Array<ReadonlyMap<string, number>> = [];
  const d = new InferenceObjectiveDiscovery(
    kc,
    { namespace, pool: POOL, backoffMs: 20, maxBackoffMs: 100 },
    (m) => seen.push(m),
    log,
  );
  t.after(async () => {
    d.stop();
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const last = (): Record<string, number> => Object.fromEntries(seen.at(-1) ?? []);
  return { api, d, seen, last };
}

test("the pool's InferenceObjectives become the priority table; created, updated, deleted; other pools ignored", async (t) => {
  const { api, d, seen, last } = await setup(t);
  api.setObjective('critical', { name: POOL }, 10);
  api.setObjective('default', { name: POOL }, undefined);
  api.setObjective('foreign', { name: 'other-pool' }, 100);
  d.start();
  await waitFor(() => seen.length > 0, 'first table');
  assert.deepEqual(last(), { critical: 10, default: 0 });
  assert.ok(api.requests.every((r) => r.auth === 'Bearer test-token'));
  await waitFor(() => api.openWatches('inferenceobjectives') === 1, 'watch open');

  api.setObjective('batch', { name: POOL, group: 'inference.networking.k8s.io', kind: 'InferencePool' }, -2);
  await waitFor(() => 'batch' in last(), 'created');
  assert.deepEqual(last(), { batch: -2, critical: 10, default: 0 });
  api.setObjective('critical', { name: POOL }, 20);
  await waitFor(() => last().critical === 20, 'updated');
  api.delete('inferenceobjectives', 'default');
  await waitFor(() => !('default' in last()), 'deleted');
  assert.deepEqual(last(), { batch: -2, critical: 20 });
  // Moved to another pool: no longer ours. A change to another pool's objective hands nothing on.
  api.setObjective('batch', { name: 'other-pool' }, -2);
  await waitFor(() => !('batch' in last()), 'moved away');
  const n = seen.length;
  api.setObjective('foreign', { name: 'other-pool' }, 5);
  api.setObjective('critical', { name: POOL }, 20); // same priority: the same table
  await new Promise((r) => setTimeout(r, 150));
  assert.equal(seen.length, n, 'an unchanged table is not handed on again');
  assert.deepEqual(last(), { critical: 20 });
});

for (const goneAs of ['status', 'event'] as const) {
  test(`a watch refused with 410 Gone (${goneAs}) re-lists and catches up; a failed list keeps the table`, async (t) => {
    const { api, d, seen, last } = await setup(t);
    api.goneAs = goneAs;
    api.setObjective('critical', { name: POOL }, 10);
    d.start();
    await waitFor(
      () => seen.length > 0 && api.openWatches('inferenceobjectives') === 1,
      'listed and watching',
    );
    const lists = api.lists('inferenceobjectives');
    // History compacted, the watch ends, and a change happens meanwhile: the re-watch gets 410.
    api.compact();
    api.endWatches();
    api.setObjective('late', { name: POOL }, 50);
    api.compact();
    await waitFor(() => last().late === 50, 'the relist sees the change');
    assert.ok(api.lists('inferenceobjectives') > lists, 'listed again');
    assert.deepEqual(last(), { critical: 10, late: 50 });
    // The API fails for a while: the last table stands, and it comes back.
    const before = seen.length;
    const listsBefore = api.lists('inferenceobjectives');
    await waitFor(() => api.openWatches('inferenceobjectives') === 1, 'watching after the relist');
    api.failNextLists(2);
    api.endWatches();
    api.setObjective('foreign', { name: 'other-pool' }, 1); // missed: the re-watch gets 410
    api.compact();
    await waitFor(
      () =>
        api.lists('inferenceobjectives') >= listsBefore + 3 && api.openWatches('inferenceobjectives') === 1,
      'two failed lists, then one that worked, and watching again',
    );
    assert.equal(seen.length, before, 'nothing handed on while failing or after an equal relist');
    api.delete('inferenceobjectives', 'late');
    await waitFor(() => !('late' in last()), 'deletion after the restart');
  });
}
