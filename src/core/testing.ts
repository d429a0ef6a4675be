import type { BackendView, RequestInfo } from './types.js';

/** A backend view for policy tests: healthy, uncapped, serving model 'm'. */
export function backendView(name: string, index: number, over: Partial<BackendView> = {}): BackendView {
  return {
    name,
    index,
    api: 'ollama',
    weight: 1,
    maxConcurrency: Infinity,
    region: undefined,
    models: new Set(['m']),
    healthy: true,
    draining: false,
    inFlight: 0,
    metrics: undefined,
    dispatchedSinceMetrics: 0,
    completedSinceMetrics: 0,
    ...over,
  };
}

/** A request for model 'm' with the given prompt. */
export function requestInfo(id: string, promptText = '', over: Partial<RequestInfo> = {}): RequestInfo {
  return { id, model: 'm', api: 'ollama', arrivedAt: 0, promptText, ...over };
}
