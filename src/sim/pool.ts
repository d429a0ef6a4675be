/**
 * Runs trace jobs on worker threads, one job per idle worker, results in job order. Policies are
 * independent runs of the same trace, so they scale with cores; with one thread they run in this
 * thread and no worker starts.
 *
 * A pool can be started before its jobs are known (startTracePool): its workers load the
 * simulator's modules while the caller still reads the trace (whatif's check pass), instead of
 * after it.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { runTraceJob, type TraceJob, type TraceJobResult } from './trace-job.js';

/** Threads to use by default: every core (the main thread only waits). */
export function defaultThreads(): number {
  return Math.max(1, availableParallelism());
}

export interface TracePool {
  /** Run `jobs` (once per pool); results in job order. */
  run(
    jobs: readonly TraceJob[],
    onDone?: (r: TraceJobResult, index: number) => void,
  ): Promise<TraceJobResult[]>;
  /** Stop the workers (always call it, also when run() was never called or failed). */
  close(): Promise<void>;
}

type WorkerMessage = { index: number; result?: TraceJobResult; error?: string };

/** Start `threads` workers now (none for one thread: jobs then run in this thread). */
export function startTracePool(threads: number = defaultThreads()): TracePool {
  const n = Math.max(1, Math.floor(threads));
  if (n <= 1) {
    return {
      run: (jobs, onDone) =>
        Promise.resolve(
          jobs.map((job, i) => {
            const r = runTraceJob(job);
            onDone?.(r, i);
            return r;
          }),
        ),
      close: () => Promise.resolve(),
    };
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
  // Until run() listens, a worker's failure is kept for it.
  let failure: Error | undefined;
  let fail = (e: Error): void => void (failure ??= e);
  let exited = (code: number): void => void (failure ??= new Error(`whatif worker exited (${code}) early`));
  const workers = Array.from({ length: n }, () => {
    const w = spawn();
    w.on('error', (e) => fail(e));
    w.on('exit', (code) => exited(code));
    return w;
  });
  let closed = false;
  return {
    run: (jobs, onDone) =>
      new Promise<TraceJobResult[]>((resolve, reject) => {
        const out = new Array<TraceJobResult>(jobs.length);
        if (failure) return reject(failure);
        if (closed) return reject(new Error('whatif pool: closed'));
        if (jobs.length === 0) return resolve(out);
        let next = 0;
        let done = 0;
        fail = reject;
        exited = (code) => {
          if (done < jobs.length) reject(new Error(`whatif worker exited (${code}) before its job finished`));
        };
        const feed = (w: Worker): void => {
          if (next >= jobs.length) return;
          const index = next++;
          w.postMessage({ index, job: jobs[index] });
        };
        for (const w of workers) {
          w.on('message', (m: WorkerMessage) => {
            if (m.error !== undefined || !m.result) {
              reject(new Error(`whatif worker: ${m.error ?? 'no result'}`));
              return;
            }
            out[m.index] = m.result;
            onDone?.(m.result, m.index);
            if (++done === jobs.length) resolve(out);
            else feed(w);
          });
          feed(w);
        }
      }),
    close: async () => {
      closed = true;
      // Exits from here on are ours.
      exited = () => undefined;
      await Promise.all(workers.map((w) => w.terminate()));
    },
  };
}

export async function runTraceJobs(
  jobs: readonly TraceJob[],
  threads: number = defaultThreads(),
  onDone?: (r: TraceJobResult, index: number) => void,
): Promise<TraceJobResult[]> {
  const pool = startTracePool(Math.min(Math.max(1, Math.floor(threads)), jobs.length));
  try {
    return await pool.run(jobs, onDone);
  } finally {
    await pool.close();
  }
}
