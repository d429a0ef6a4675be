/** Worker thread of `llmlb whatif`: runs the jobs it is sent, one at a time, and posts each result. */
import { parentPort } from 'node:worker_threads';
import { runTraceJob, type TraceJob } from './trace-job.js';

parentPort?.on('message', (msg: { index: number; job: TraceJob }) => {
  try {
    parentPort!.postMessage({ index: msg.index, result: runTraceJob(msg.job) });
  } catch (err) {
    parentPort!.postMessage({ index: msg.index, error: (err as Error).stack ?? String(err) });
  }
});
