/**
 * `npm run bench:k8s`: what Kubernetes discovery costs (src/fleet/kubernetes/), against the fake
 * API server of the tests (real HTTP on loopback, in this process — its work is in the CPU figure):
 *   - loading @kubernetes/client-node (a fresh process: what `serve` pays once, when configured);
 *   - the first list of a pool of N ready pods, to the first endpoints handed on;
 *   - one pod's readiness flip, watch event to the updated endpoints (debounce 0), p50/p99;
 *   - CPU per flip (this process: the client's JSON line parse, the cache, the endpoint list).
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
mkdirSync('bench-out', { recursive: true });
writeFileSync('bench-out/k8s-discovery.json', JSON.stringify({ imports, rows }, null, 2));
