import './policies/builtin-plugins.js';
import type { Plugin, Scorer } from './policies/plugin.js';
import { pluginFactory } from './policies/plugins.js';
import { createRng } from './rng.js';
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
    loadedModels: undefined,
    dispatchedSinceMetrics: 0,
    completedSinceMetrics: 0,
    ...over,
  };
}

/** A request for model 'm' with the given prompt. */
export function requestInfo(id: string, promptText = '', over: Partial<RequestInfo> = {}): RequestInfo {
  return { id, model: 'm', api: 'ollama', arrivedAt: 0, promptText, ...over };
}

/** A fresh plugin of a registered type, for plugin tests. */
export function makePlugin<K extends Plugin['kind']>(
  kind: K,
  type: string,
  params: Record<string, unknown> = {},
  opts: { random?: () => number; lookup?: (name: string) => Plugin | undefined } = {},
): Extract<Plugin, { kind: K }> {
  const factory = pluginFactory(type);
  if (!factory) throw new Error(`no plugin type '${type}'`);
  const p = factory({
    name: type,
    params,
    random: opts.random ?? createRng(1),
    lookup: opts.lookup ?? (() => undefined),
  });
  if (p.kind !== kind) throw new Error(`${type} is a ${p.kind}, not a ${kind}`);
  return p as Extract<Plugin, { kind: K }>;
}

/** Runs a scorer over candidates and returns the scores as a plain array. */
export function scoresOf(s: Scorer, req: RequestInfo, candidates: readonly BackendView[], now = 0): number[] {
  const out = new Float64Array(candidates.length);
  s.score(req, candidates, now, out);
  return Array.from(out);
}
