import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import type { BackendEntry } from '../../config/schema.js';
import { kubernetesDiscoverySchema } from '../../config/kubernetes-discovery.js';
import { FleetSync, type DiscoveryTarget } from './fleet-sync.js';

const template = kubernetesDiscoverySchema.parse({
  inferencePool: 'p',
  backend: { models: ['m'], maxConcurrency: 8 },
}).backend;

/** A fleet that records what it was asked, and refuses what the test says. */
function fakeFleet() {
  const fleet = new Map<string, BackendEntry>();
  const calls: string[] = [];
  const refuse = { add: new Set<string>(), remove: new Set<string>() };
  const target: DiscoveryTarget = {
    add: async (e) => {
      calls.push(`add ${e.name}`);
      if (refuse.add.has(e.name)) throw new Error(`backend '${e.name}' already exists`);
      fleet.set(e.name, e);
    },
    remove: (name) => {
      calls.push(`remove ${name}`);
      if (refuse.remove.has(name)) throw new Error(`policy 'pinned' is pinned to '${name}'`);
      fleet.delete(name);
    },
  };
  return { fleet, calls, refuse, target };
}

test('adds new pods from the template, removes gone ones, re-adds one whose address changed', async () => {
  const f = fakeFleet();
  const s = new FleetSync(f.target, template, pino({ level: 'silent' }));
  await s.update([
    { name: 'a', url: 'http://10.0.0.1:8000' },
    { name: 'b', url: 'http://10.0.0.2:8000' },
  ]);
  assert.deepEqual(f.fleet.get('a'), {
    name: 'a',
    url: 'http://10.0.0.1:8000',
    api: 'openai',
    models: ['m'],
    maxConcurrency: 8,
    weight: 1,
    region: undefined,
    streamUsage: true,
  });
  f.calls.length = 0;
  await s.update([
    { name: 'a', url: 'http://10.0.0.9:8000' },
    { name: 'c', url: 'http://10.0.0.3:8000' },
  ]);
  assert.deepEqual(f.calls, ['remove a', 'remove b', 'add a', 'add c']);
  assert.equal(f.fleet.get('a')?.url, 'http://10.0.0.9:8000');
  assert.deepEqual(s.names(), ['a', 'c']);
});

test('a refused removal is kept and tried again; a refused add is not counted and tried again', async () => {
  const f = fakeFleet();
  const s = new FleetSync(f.target, template, pino({ level: 'silent' }));
  f.refuse.add.add('static-twin');
  await s.update([
    { name: 'a', url: 'http://10.0.0.1:8000' },
    { name: 'static-twin', url: 'http://10.0.0.2:8000' },
  ]);
  assert.deepEqual(s.names(), ['a']);
  f.refuse.remove.add('a');
  await s.update([]);
  assert.deepEqual(s.names(), ['a'], 'pinned: still in the fleet, still ours');
  assert.ok(f.fleet.has('a'));
  f.refuse.remove.clear();
  f.calls.length = 0;
  await s.update([]);
  assert.deepEqual(f.calls, ['remove a']);
  assert.deepEqual(s.names(), []);
});

test('updates run one at a time, in order, even when fired without waiting', async () => {
  const f = fakeFleet();
  const s = new FleetSync(f.target, template, pino({ level: 'silent' }));
  const p1 = s.update([{ name: 'a', url: 'http://10.0.0.1:8000' }]);
  const p2 = s.update([]);
  const p3 = s.update([{ name: 'b', url: 'http://10.0.0.2:8000' }]);
  await Promise.all([p1, p2, p3]);
  assert.deepEqual(f.calls, ['add a', 'remove a', 'add b']);
  assert.deepEqual([...f.fleet.keys()], ['b']);
});
