/**
 * Worker thread of `llmlb whatif` and `llmlb simulate`: runs the jobs it is sent, one at a time,
 * and posts each result.
 */
import { parentPort } from 'node:worker_threads';
import { runScenarioJob, type ScenarioJob } from './scenario-job.js';
import { runTraceJob, type TraceJob } from './trace-job.js';

parentPort?.on('message', (msg: { index: number; job: TraceJob | ScenarioJob }) => {
  try {
    const job = msg.job;
    const result = 'scenarioPath' in job ? runScenarioJob(job) : runTraceJob(job);
    parentPort!.postMessage({ index: msg.index, result });
  } catch (err) {
    parentPort!.postMessage({ index: msg.index, error: (err as Error).stack ?? String(err) });
  }
});
