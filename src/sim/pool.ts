/**
 * Runs simulation jobs (whatif's trace jobs, simulate's scenario jobs) on worker threads, one job
 * per idle worker, results in job order. Policies are independent runs of the same workload, so
 * they scale with cores; with one thread they run in this thread and no worker starts.
 *
 * A pool can be started before its jobs are known (startTracePool): its workers load the
 * simulator's modules while the caller still reads the trace (whatif's check pass), instead of
 * after it.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { runScenarioJob, type ScenarioJob, type ScenarioJobResult } from './scenario-job.js';
import { runTraceJob, type TraceJob, type TraceJobResult } from './trace-job.js';

/** Threads to use by default: every core (the main thread only waits). */
export function defaultThreads(): number {
  return Math.max(1, availableParallelism());
}

export interface SimPool<J, R> {
  /** Run `jobs` (once per pool); results in job order. */
  run(jobs: readonly J[], onDone?: (r: R, index: number) => void): Promise<R[]>;
  /** Stop the workers (always call it, also when run() was never called or failed). */
  close(): Promise<void>;
}

export type TracePool = SimPool<TraceJob, TraceJobResult>;
export type ScenarioPool = SimPool<ScenarioJob, ScenarioJobResult>;

type WorkerMessage<R> = { index: number; result?: R; error?: string };

/** Start `threads` workers now for whatif's trace jobs (none for one thread: jobs then run here). */
export function startTracePool(threads: number = defaultThreads()): TracePool {
  return startPool(threads, runTraceJob);
}

/** Start `threads` workers now for simulate's scenario jobs (none for one thread). */
export function startScenarioPool(threads: number = defaultThreads()): ScenarioPool {
  return startPool(threads, (job) => runScenarioJob(job));
}

function startPool<J, R>(threads: number, runHere: (job: J) => R): SimPool<J, R> {
  const n = Math.max(1, Math.floor(threads));
  if (n <= 1) {
    let closed = false;
    return {
      run: (jobs, onDone) =>
        closed
          ? Promise.reject(new Error('simulation pool: closed'))
          : new Promise<R[]>((resolve) =>
              resolve(
                jobs.map((job, i) => {
                  const r = runHere(job);
                  onDone?.(r, i);
                  return r;
                }),
              ),
            ),
      close: () => {
        closed = true;
        return Promise.resolve();
      },
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
  let exited = (code: number): void =>
    void (failure ??= new Error(`simulation worker exited (${code}) early`));
  const workers = Array.from({ length: n }, () => {
    const w = spawn();
    w.on('error', (e) => fail(e));
    w.on('exit', (code) => exited(code));
    return w;
  });
  let closed = false;
  return {
    run: (jobs, onDone) =>
      new Promise<R[]>((resolve, reject) => {
        const out = new Array<R>(jobs.length);
        if (failure) return reject(failure);
        if (closed) return reject(new Error('simulation pool: closed'));
        if (jobs.length === 0) return resolve(out);
        let next = 0;
        let done = 0;
        fail = reject;
        exited = (code) => {
          if (done < jobs.length)
            reject(new Error(`simulation worker exited (${code}) before its job finished`));
        };
        const feed = (w: Worker): void => {
          if (next >= jobs.length) return;
          const index = next++;
          w.postMessage({ index, job: jobs[index] });
        };
        for (const w of workers) {
          w.on('message', (m: WorkerMessage<R>) => {
            if (m.error !== undefined || !m.result) {
              reject(new Error(`simulation worker: ${m.error ?? 'no result'}`));
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
