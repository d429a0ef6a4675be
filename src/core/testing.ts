import './policies/framework/builtin-plugins.js';
import type { Plugin, Scorer } from './policies/framework/plugin.js';
import { pluginFactory } from './policies/framework/plugins.js';
import { createRng } from './rng.js';
import { isHold } from './types.js';
import type { BackendView, CompletionReport, Hold, Policy, RequestInfo } from './types.js';
export { chosen } from './types.js';

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

/** Distinct text of `chars` characters (no two 8-character windows alike, unlike 'x'.repeat). */
export function distinctText(seed: string, chars: number): string {
  let s = '';
  for (let i = 0; s.length < chars; i++) s += `${seed}:${i};`;
  return s.slice(0, chars);
}

/** An engine-measured answer: 1 ms per prefilled token, 10 ms per output token (and what it found cached). */
export function engineReport(
  at: number,
  prompt: number,
  prefilled: number,
  out: number,
  cached?: number,
): CompletionReport {
  return {
    ok: true,
    dispatchedAt: at,
    finishedAt: at + prefilled + 10 * out,
    promptTokens: prompt,
    completionTokens: out,
    promptEvalMs: prefilled,
    evalMs: 10 * out,
    ...(cached !== undefined ? { cachedTokens: cached } : {}),
  };
}

/**
 * Teaches a policy the same rates on every view (four answers each, prompts that share nothing):
 * 1 ms a prompt token, 10 ms an output token. Returns the time after them (ms).
 */
export function warmRates(p: Policy, views: readonly BackendView[]): number {
  let t = 0;
  for (let i = 0; i < 4; i++) {
    for (const v of views) {
      const r = requestInfo(`w${v.name}${i}`, distinctText(`warm-${v.name}-${i}`, 400 * (i + 1)));
      p.onDispatch?.(r, v, t);
      const rep = engineReport(t, 100 * (i + 1), 100 * (i + 1), 50);
      p.onComplete?.(r, v, rep, rep.finishedAt);
    }
    t += 10_000;
  }
  return t;
}

/** A picker's answer as a list (a hold: empty), for tests that ignore the hold's reason. */
export function listOf(r: readonly BackendView[] | Hold): readonly BackendView[] {
  return isHold(r) ? [] : r;
}
