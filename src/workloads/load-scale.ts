/**
 * What "×k the load" means for each workload type (`llmlb simulate --rate-scale`, a scenario's
 * `rateScales`): the question a load sweep answers is "at which load does my fleet break", so ×k is
 * k times the traffic over the same `durationS`, built from the same requests where the workload has
 * them:
 *
 * - open loop (constant, poisson, bursty, task-mix): k× the arrival rate over the same window, and
 *   k× `count` when one is given. The i-th request is the ×1 run's i-th request (lengths and text
 *   draw from their own streams), its send time divided by k — k× the requests in the same time.
 * - bursts: k× `baseRate` and `burstRate` (and `count`): the same burst timing, k× as intense.
 * - closed loop (multi-turn, tree-of-thought): k× the `clients`, each with the same think times
 *   (client i sends what it sends at ×1; the shared system prompt stays shared).
 * - a fixed script of requests (trace, heimdall): the same requests sent k× faster — the only
 *   option, no requests can be invented. A trace's `rateScale` is multiplied by k; its `durationS`
 *   and `limit` still cut the replay, so a trace longer than the run gives k× the requests in it.
 * - prefix-heavy: k× `rate`, so k× the document reads and k× the sessions (conversations, agent
 *   runs), each paced as at ×1 (think times, step gaps). The trace is generated anew at that rate:
 *   at ×k it is not the ×1 trace sent faster (a conversation's turns keep their spacing).
 * - mix: each part by its own type's rule.
 *
 * ×1 is never scaled (a scenario at ×1 is byte for byte the scenario). A type without a rule here
 * cannot be swept: binding it at k ≠ 1 says so.
 */
import type { z } from 'zod';
import type { burstsParamsSchema } from './bursts.js';
import type { burstyParamsSchema } from './bursty.js';
import type { constantParamsSchema } from './constant.js';
import type { heimdallParamsSchema } from './heimdall.js';
import type { multiTurnParamsSchema } from './multi-turn.js';
import type { poissonParamsSchema } from './poisson.js';
import type { prefixHeavyParamsSchema } from './prefix-heavy.js';
import type { taskMixParamsSchema } from './task-mix.js';
import type { traceParamsSchema } from './trace.js';
import type { treeOfThoughtParamsSchema } from './tree-of-thought.js';

/** A workload's validated params at k× its load. */
export type LoadScaler<P> = (params: P, k: number) => P;

/** A count of things (requests, clients) at ×k: never below 1. */
export function scaledCount(n: number, k: number): number {
  return Math.max(1, Math.round(n * k));
}

const count = (n: number | undefined, k: number): number | undefined =>
  n === undefined ? undefined : scaledCount(n, k);

/** constant, poisson, bursty, task-mix: k× the rate (and the count). */
function scaleRate<P extends { rate: number; count?: number | undefined }>(p: P, k: number): P {
  return { ...p, rate: p.rate * k, count: count(p.count, k) };
}

export const scaleConstant: LoadScaler<z.output<typeof constantParamsSchema>> = scaleRate;
export const scalePoisson: LoadScaler<z.output<typeof poissonParamsSchema>> = scaleRate;
export const scaleBursty: LoadScaler<z.output<typeof burstyParamsSchema>> = scaleRate;
export const scaleTaskMix: LoadScaler<z.output<typeof taskMixParamsSchema>> = scaleRate;

export const scaleBursts: LoadScaler<z.output<typeof burstsParamsSchema>> = (p, k) => ({
  ...p,
  baseRate: p.baseRate * k,
  burstRate: p.burstRate * k,
  count: count(p.count, k),
});

export const scaleMultiTurn: LoadScaler<z.output<typeof multiTurnParamsSchema>> = (p, k) => ({
  ...p,
  clients: scaledCount(p.clients, k),
});

export const scaleTreeOfThought: LoadScaler<z.output<typeof treeOfThoughtParamsSchema>> = (p, k) => ({
  ...p,
  clients: scaledCount(p.clients, k),
});

export const scaleTrace: LoadScaler<z.output<typeof traceParamsSchema>> = (p, k) => ({
  ...p,
  rateScale: p.rateScale * k,
});

/** heimdall's script: every gap of its schedule divided by k (the same requests, k× faster). */
export const scaleHeimdall: LoadScaler<z.output<typeof heimdallParamsSchema>> = (p, k) => ({
  ...p,
  seedInterval: p.seedInterval / k,
  burstStart: p.burstStart / k,
  burstInterval: p.burstInterval / k,
  jitter: p.jitter / k,
  inlineExtraGap: p.inlineExtraGap / k,
});

/** prefix-heavy: k× the arrival rate of requests (its sessions' own pacing unchanged). */
export const scalePrefixHeavy: LoadScaler<z.output<typeof prefixHeavyParamsSchema>> = (p, k) => ({
  ...p,
  rate: p.rate * k,
});
