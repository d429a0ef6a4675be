/**
 * Runs trace jobs on worker threads, one job per idle worker, results in job order. Policies are
 * independent runs of the same trace, so they scale with cores; with one thread (or one job) they
 * run in this thread and no worker starts.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { runTraceJob, type TraceJob, type TraceJobResult } from './trace-job.js';

/** Threads to use by default: every core (the main thread only waits). */
export function defaultThreads(): number {
  return Math.max(1, availableParallelism());
}

export async function runTraceJobs(
  jobs: readonly TraceJob[],
  threads: number = defaultThreads(),
  onDone?: (r: TraceJobResult, index: number) => void,
): Promise<TraceJobResult[]> {
  const n = Math.min(Math.max(1, Math.floor(threads)), jobs.length);
  const out = new Array<TraceJobResult>(jobs.length);
  if (n <= 1) {
    jobs.forEach((job, i) => {
      out[i] = runTraceJob(job);
      onDone?.(out[i], i);
    });
    return out;
  }
  // The worker file sits beside this one: .js once built, .ts under tsx (dev, tests), where the
  // worker needs tsx's loader too (module hooks are per thread).
  const ts = import.meta.url.endsWith('.ts');
  const url = new URL(`./trace-worker${ts ? '.ts' : '.js'}`, import.meta.url);
  const spawn = (): Worker => {
    if (!ts) return new Worker(url);
    const api = import.meta.resolve('tsx/esm/api');
    const boot = `import(${JSON.stringify(api)}).then((t) => { t.register(); return import(${JSON.stringify(url.href)}); })`;
    return new Worker(boot, { eval: true });
  };
  const workers: Worker[] = [];
  try {
    await new Promise<void>((resolve, reject) => {
      let next = 0;
      let done = 0;
      const feed = (w: Worker): void => {
        if (next >= jobs.length) return;
        const index = next++;
        w.postMessage({ index, job: jobs[index] });
      };
      for (let i = 0; i < n; i++) {
        const w = spawn();
        workers.push(w);
        w.on('message', (m: { index: number; result?: TraceJobResult; error?: string }) => {
          if (m.error !== undefined || !m.result) {
            reject(new Error(`whatif worker: ${m.error ?? 'no result'}`));
            return;
          }
          out[m.index] = m.result;
          onDone?.(m.result, m.index);
          if (++done === jobs.length) resolve();
          else feed(w);
        });
        w.on('error', reject);
        w.on('exit', (code) => {
          if (done < jobs.length) reject(new Error(`whatif worker exited (${code}) before its job finished`));
        });
        feed(w);
      }
    });
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return out;
}
