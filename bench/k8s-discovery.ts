/**
 * `npm run bench:k8s`: what Kubernetes discovery costs (src/fleet/kubernetes/), against the fake
 * API server of the tests (real HTTP on loopback, in this process — its work is in the CPU figure):
 *   - loading @kubernetes/client-node (a fresh process: what `serve` pays once, when configured);
 *   - the first list of a pool of N ready pods, to the first endpoints handed on;
 *   - one pod's readiness flip, watch event to the updated endpoints (debounce 0), p50/p99;
 *   - CPU per flip (this process: the client's JSON line parse, the cache, the endpoint list);
 *   - InferenceObjectives (100 for the pool): one priority changed, watch event to the router's
 *     table, p50/p99; and a request's priority lookup in that table (ns per lookup).
 * Figures to stdout and bench-out/k8s-discovery.json.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { kubernetesDiscoverySchema } from '../src/config/kubernetes-discovery.js';
import type { Endpoint } from '../src/fleet/kubernetes/endpoints.js';
import { FakeKubeApi } from '../src/fleet/kubernetes/fake-api.testing.js';
import { kubeConfigFor } from '../src/fleet/kubernetes/kube-config.js';
import { InferencePoolDiscovery } from '../src/fleet/kubernetes/pool-discovery.js';
import { InferenceObjectiveDiscovery } from '../src/fleet/kubernetes/objective-discovery.js';
import { ObjectiveTable } from '../src/proxy/objectives.js';
import { ascending, percentile } from '../src/report/stats.js';

const FLIPS = 300;
const sel = { app: 'vllm' };

function importCost(): number[] {
  const out: number[] = [];
  for (let i = 0; i < 3; i++) {
    const r = spawnSync(
      process.execPath,
      [
        '-e',
        "const t=performance.now();import('@kubernetes/client-node').then(()=>console.log(performance.now()-t))",
      ],
      { encoding: 'utf8' },
    );
    out.push(Number(r.stdout.trim()));
  }
  return out;
}

async function run(pods: number): Promise<Record<string, number>> {
  const api = new FakeKubeApi('ns');
  await api.start();
  api.setPool('pool', sel, 8000);
  for (let i = 0; i < pods; i++)
    api.setPod(`pod-${i}`, sel, `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, true);
  const cfg = kubernetesDiscoverySchema.parse({ inferencePool: 'pool', namespace: 'ns', apiServer: api.url });
  const { kc } = kubeConfigFor(cfg, {}, '/nonexistent');
  let last: Endpoint[] = [];
  let wake: (() => void) | undefined;
  const d = new InferencePoolDiscovery(
    kc,
    { namespace: 'ns', pool: 'pool', debounceMs: 0 },
    (eps) => {
      last = eps;
      wake?.();
    },
    pino({ level: 'silent' }),
  );
  const until = (cond: () => boolean): Promise<void> =>
    new Promise((resolve) => {
      if (cond()) return resolve();
      wake = () => {
        if (cond()) {
          wake = undefined;
          resolve();
        }
      };
    });
  const t0 = performance.now();
  d.start();
  await until(() => last.length === pods);
  const firstMs = performance.now() - t0;
  while (api.openWatches('pods') === 0) await new Promise((r) => setTimeout(r, 5));
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  for (let k = 0; k < FLIPS; k++) {
    const i = k % pods;
    const ip = `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`;
    const t = performance.now();
    api.setPod(`pod-${i}`, sel, ip, false);
    await until(() => last.length === pods - 1);
    lat.push(performance.now() - t);
    api.setPod(`pod-${i}`, sel, ip, true);
    await until(() => last.length === pods);
  }
  const cpu = process.cpuUsage(cpu0);
  d.stop();
  await api.close();
  return {
    pods,
    firstListMs: firstMs,
    flipP50Ms: percentile(ascending(lat), 0.5),
    flipP99Ms: percentile(ascending(lat), 0.99),
    cpuPerEventUs: (cpu.user + cpu.system) / (2 * FLIPS),
  };
}

/** InferenceObjectives: a priority change to the router's table, and the per-request lookup. */
async function objectives(n: number): Promise<Record<string, number>> {
  const api = new FakeKubeApi('ns');
  await api.start();
  for (let i = 0; i < n; i++) api.setObjective(`obj-${i}`, { name: 'pool' }, i);
  api.setObjective('foreign', { name: 'other' }, 1);
  const cfg = kubernetesDiscoverySchema.parse({ inferencePool: 'pool', namespace: 'ns', apiServer: api.url });
  const { kc } = kubeConfigFor(cfg, {}, '/nonexistent');
  const table = new ObjectiveTable();
  const configured = { 'static-only': { priority: 3 } };
  let wake: (() => void) | undefined;
  const d = new InferenceObjectiveDiscovery(
    kc,
    { namespace: 'ns', pool: 'pool' },
    (m) => {
      table.setDiscovered(m);
      wake?.();
    },
    pino({ level: 'silent' }),
  );
  const until = (cond: () => boolean): Promise<void> =>
    new Promise((resolve) => {
      if (cond()) return resolve();
      wake = () => {
        if (cond()) {
          wake = undefined;
          resolve();
        }
      };
    });
  d.start();
  await until(() => table.priority(configured, `obj-${n - 1}`) === n - 1);
  while (api.openWatches('inferenceobjectives') === 0) await new Promise((r) => setTimeout(r, 5));
  const lat: number[] = [];
  for (let k = 0; k < FLIPS; k++) {
    const name = `obj-${k % n}`;
    const p = 1000 + k;
    const t = performance.now();
    api.setObjective(name, { name: 'pool' }, p);
    await until(() => table.priority(configured, name) === p);
    lat.push(performance.now() - t);
  }
  d.stop();
  await api.close();
  const LOOKUPS = 2_000_000;
  const names = Array.from({ length: 64 }, (_, i) => (i % 2 ? `obj-${i}` : 'no-such-objective'));
  let sum = 0;
  const t = performance.now();
  for (let i = 0; i < LOOKUPS; i++) sum += table.priority(configured, names[i & 63]) ?? 0;
  const lookupNs = ((performance.now() - t) * 1e6) / LOOKUPS;
  if (sum === 0) throw new Error('no lookups');
  return {
    objectives: n,
    changeP50Ms: percentile(ascending(lat), 0.5),
    changeP99Ms: percentile(ascending(lat), 0.99),
    lookupNs,
  };
}

const imports = importCost();
const rows = [];
for (const n of [10, 100, 1000]) rows.push(await run(n));
const f = (x: number): string => x.toFixed(2);
console.log(
  `machine: ${cpus().length} CPUs, load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
console.log(
  `@kubernetes/client-node import (fresh process): ${imports.map((x) => `${x.toFixed(0)} ms`).join(', ')}`,
);
console.log('pods   first list → endpoints   flip → endpoints p50 / p99   CPU per watch event');
for (const r of rows)
  console.log(
    `${String(r.pods).padStart(4)}   ${f(r.firstListMs!).padStart(10)} ms            ${f(r.flipP50Ms!)} / ${f(r.flipP99Ms!)} ms           ${f(r.cpuPerEventUs!)} µs`,
  );
const obj = await objectives(100);
console.log(
  `InferenceObjectives (${obj.objectives} for the pool): priority change → router table p50 / p99 ${f(obj.changeP50Ms!)} / ${f(obj.changeP99Ms!)} ms; lookup per request ${f(obj.lookupNs!)} ns`,
);
mkdirSync('bench-out', { recursive: true });
writeFileSync('bench-out/k8s-discovery.json', JSON.stringify({ imports, rows, objectives: obj }, null, 2));
