/**
 * `npm run bench:matrix [-- --scenarios a,b] [--policies x,y] [--duration S] [--seed N] [--threads N] [--progress]`:
 * every built-in policy × every shipped scenario (scenarios/*.yaml, the trace-shaped ones
 * included), simulated on worker threads, then one table of mean E2E and TTFT p90 relative to the
 * best baseline (round-robin, least-connections) per scenario, and the policies that lose to round
 * robin somewhere (issue #20). `--duration S` cuts every scenario's sends at S seconds (faster,
 * noisier); `--seed N` runs every scenario under seed N instead of its own. Prints its wall time.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { basename, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { isMainThread, parentPort, Worker } from 'node:worker_threads';
import { parse } from 'yaml';
import {
  checkEndpointPickerConfig,
  endpointPickerConfigSchema,
  profileNames,
  type EndpointPickerConfig,
} from '../src/core/policies/framework/endpoint-picker-config.js';
import { loadScenario } from '../src/scenario/load.js';
import {
  BASELINES,
  judge,
  losers,
  matrixPolicies,
  matrixTable,
  runCell,
  shortened,
  type MatrixCell,
} from '../src/sim/matrix.js';

interface Job {
  readonly path: string;
  readonly policy: string;
  readonly durationS: number | undefined;
  /** Overrides the scenario's seed. */
  readonly seed?: number | undefined;
  /** A scheduling profile: the file whose `scheduling:` block defines it, and its matrix label. */
  readonly profile?: { readonly file: string; readonly label: string };
}

/** A `scheduling:` block of a scenario or router config file, validated. */
function schedulingOf(file: string): EndpointPickerConfig | undefined {
  const doc = parse(readFileSync(file, 'utf8')) as { scheduling?: unknown } | null;
  if (!doc || doc.scheduling === undefined) return undefined;
  const cfg = endpointPickerConfigSchema.parse(doc.scheduling);
  checkEndpointPickerConfig(cfg);
  return cfg;
}

/**
 * Scheduling profiles shipped in scenarios and example configs (Heimdall's load-aware and
 * Heimdall profiles): they join the matrix like built-ins, labelled by profile name (prefixed with
 * the example's file name when the profile is just "default").
 */
function profileSources(files: readonly string[]): { file: string; profile: string; label: string }[] {
  const out: { file: string; profile: string; label: string }[] = [];
  const seen = new Set<string>();
  for (const file of files) {
    let cfg: EndpointPickerConfig | undefined;
    try {
      cfg = schedulingOf(file);
    } catch {
      continue; // not a config with a valid scheduling block
    }
    for (const profile of profileNames(cfg)) {
      const label = profile === 'default' ? basename(file, '.yaml') : profile;
      if (seen.has(label)) continue;
      seen.add(label);
      out.push({ file, profile, label });
    }
  }
  return out;
}

const DEFAULT_POLICY = 'estimated-wait';

function runJob(job: Job): MatrixCell {
  const loaded = loadScenario(job.path);
  const scenario = shortened(job.seed === undefined ? loaded : { ...loaded, seed: job.seed }, job.durationS);
  if (!job.profile) return runCell(scenario, policySpec(job.policy));
  const scheduling = schedulingOf(job.profile.file)!;
  return runCell(scenario, job.policy, { scheduling, label: job.profile.label });
}

/** `name` or `name{"param":value}` (a variant with parameters, e.g. for an ablation). */
function policySpec(s: string): { name: string; params?: Record<string, unknown> } {
  const i = s.indexOf('{');
  if (i < 0) return { name: s };
  return { name: s.slice(0, i), params: JSON.parse(s.slice(i)) as Record<string, unknown> };
}

const progress = process.argv.includes('--progress');

if (!isMainThread) {
  parentPort!.on('message', (m: { index: number; job: Job }) => {
    try {
      const t = performance.now();
      const cell = runJob(m.job);
      parentPort!.postMessage({ index: m.index, cell, ms: performance.now() - t });
    } catch (err) {
      parentPort!.postMessage({ index: m.index, error: (err as Error).message });
    }
  });
} else {
  await main();
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const dir = join(import.meta.dirname, '..', 'scenarios');
  const only = arg('scenarios')?.split(',');
  const durationS = arg('duration') !== undefined ? Number(arg('duration')) : undefined;
  const seed = arg('seed') !== undefined ? Number(arg('seed')) : undefined;
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort();
  const scenarios: { path: string; name: string }[] = [];
  for (const f of files) {
    const path = join(dir, f);
    try {
      const s = loadScenario(path);
      if (!only || only.includes(s.name)) scenarios.push({ path, name: s.name });
    } catch (err) {
      console.error(`skipped ${f}: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  const all = matrixPolicies();
  // Split on commas outside braces: a variant's JSON may hold commas.
  const policies = arg('policies')?.split(/,(?![^{]*\})/) ?? all;
  for (const b of BASELINES) if (!policies.includes(b)) policies.unshift(b);
  const examples = join(import.meta.dirname, '..', 'examples');
  const profiles = profileSources([
    ...files.map((f) => join(dir, f)),
    ...readdirSync(examples)
      .filter((f) => f.endsWith('.yaml'))
      .sort()
      .map((f) => join(examples, f)),
  ]);
  const jobs: Job[] = scenarios.flatMap((s) => [
    ...policies.map((policy) => ({ path: s.path, policy, durationS, seed })),
    ...(arg('policies') ? [] : profiles).map((p) => ({
      path: s.path,
      policy: p.profile,
      durationS,
      seed,
      profile: { file: p.file, label: p.label },
    })),
  ]);
  const threads = Math.min(jobs.length, Number(arg('threads') ?? availableParallelism()));
  console.error(
    `${jobs.length} runs (${scenarios.length} scenarios × ${jobs.length / Math.max(1, scenarios.length)} policies and profiles) on ${threads} threads`,
  );
  const cells = await runAll(jobs, threads);
  const judged = judge(cells.filter((c): c is MatrixCell => c !== undefined));
  console.log(matrixTable(judged));
  console.log('');
  console.log('Cells: mean E2E and TTFT p90 relative to the better of round-robin and least-connections');
  console.log('(lower is better; failed or unfinished requests count until the run ends).');
  const lost = losers(judged);
  const byPolicy = new Map<string, string[]>();
  for (const l of lost) {
    const list = byPolicy.get(l.policy) ?? [];
    list.push(`${l.scenario} (+${((l.e2eVsRoundRobin - 1) * 100).toFixed(1)}%)`);
    byPolicy.set(l.policy, list);
  }
  console.log('');
  if (byPolicy.size === 0)
    console.log('No policy loses to round-robin by more than 2 % on mean E2E anywhere.');
  else {
    console.log('Loses to round-robin by more than 2 % on mean E2E:');
    for (const [p, where] of byPolicy) console.log(`  ${p}: ${where.join(', ')}`);
  }
  const def = judged.filter((j) => j.policy === DEFAULT_POLICY);
  if (def.length > 0) {
    const worst = def.reduce((a, b) => (b.e2eVsBest > a.e2eVsBest ? b : a));
    console.log(
      `Default (${DEFAULT_POLICY}): worst mean E2E vs best baseline ${((worst.e2eVsBest - 1) * 100).toFixed(1)}% ` +
        `(${worst.scenario}); best ${((Math.min(...def.map((d) => d.e2eVsBest)) - 1) * 100).toFixed(1)}%.`,
    );
  }
  console.log(`wall time ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

async function runAll(jobs: readonly Job[], threads: number): Promise<(MatrixCell | undefined)[]> {
  const out = new Array<MatrixCell | undefined>(jobs.length);
  let done = 0;
  const report = (i: number, cell: MatrixCell | undefined, error?: string, ms?: number): void => {
    out[i] = cell;
    done++;
    const j = jobs[i]!;
    const what = `${j.profile?.label ?? j.policy} on ${basename(j.path, '.yaml')}`;
    if (error) console.error(`  ${what}: ${error}`);
    else if (progress) console.error(`  [${done}/${jobs.length}] ${what} ${((ms ?? 0) / 1000).toFixed(1)} s`);
  };
  if (threads <= 1) {
    jobs.forEach((j, i) => {
      try {
        const t = performance.now();
        const cell = runJob(j);
        report(i, cell, undefined, performance.now() - t);
      } catch (err) {
        report(i, undefined, (err as Error).message);
      }
    });
    return out;
  }
  await new Promise<void>((resolve, reject) => {
    let next = 0;
    let finished = 0;
    const workers: Worker[] = [];
    const feed = (w: Worker): void => {
      if (next < jobs.length) {
        const index = next++;
        w.postMessage({ index, job: jobs[index] });
      } else w.terminate().catch(reject);
    };
    for (let t = 0; t < threads; t++) {
      // A worker's entry module is loaded before any --import runs in it (Node 20), so the worker
      // registers tsx itself, then loads this file.
      const w = new Worker(
        `import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(import.meta.url)}); })`,
        { eval: true },
      );
      workers.push(w);
      w.on('message', (m: { index: number; cell?: MatrixCell; error?: string; ms?: number }) => {
        report(m.index, m.cell, m.error, m.ms);
        if (++finished === jobs.length) resolve();
        feed(w);
      });
      w.on('error', reject);
      feed(w);
    }
  });
  return out;
}
