import type { BackendView, CompletionReport, Policy, RequestInfo } from '../../types.js';
import type { WorkloadTracker } from '../shared/workload-tracker.js';

/** The Policy hooks every WorkloadTracker-based policy shares (it feeds the tracker). */
export function trackedHooks(
  tracker: WorkloadTracker,
): Required<Pick<Policy, 'onDispatch' | 'onComplete' | 'onBackendRemoved' | 'describe' | 'requestClass'>> {
  return {
    onDispatch: (req: RequestInfo, b: BackendView, now: number) => tracker.onDispatch(req, b, now),
    onComplete: (req: RequestInfo, b: BackendView, r: CompletionReport) => tracker.onComplete(req, b, r),
    onBackendRemoved: (name: string) => tracker.onBackendRemoved(name),
    describe: (name: string) => tracker.describe(name),
    requestClass: (id: string, backend: string) => tracker.flightClass(id, backend),
  };
}
