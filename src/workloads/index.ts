/**
 * Workload generators by `type` name: what a scenario's `workload:` section names. Each entry has
 * its zod params schema and a factory `(params, seed) => ClientDriver`; both `llmlb simulate` and
 * `llmlb bench` build drivers through here, so the same seed gives the same requests in both.
 */
import { z } from 'zod';
import { burstsParamsSchema, burstsWorkload } from './bursts.js';
import { burstyParamsSchema, burstyWorkload } from './bursty.js';
import { constantParamsSchema, constantWorkload } from './constant.js';
import { heimdallParamsSchema, heimdallWorkload } from './heimdall.js';
import {
  scaleBursts,
  scaleBursty,
  scaleConstant,
  scaleHeimdall,
  scaleMultiTurn,
  scalePoisson,
  scalePrefixHeavy,
  scaleTaskMix,
  scaleTrace,
  scaleTreeOfThought,
  type LoadScaler,
} from './load-scale.js';
import { checkMixParams, mixParamsSchema, mixWorkload, type PartBinder } from './mix.js';
import { multiTurnParamsSchema, multiTurnWorkload } from './multi-turn.js';
import { poissonParamsSchema, poissonWorkload } from './poisson.js';
import { prefixHeavyParamsSchema, prefixHeavyWorkload } from './prefix-heavy.js';
import { taskMixParamsSchema, taskMixWorkload } from './task-mix.js';
import { traceParamsSchema, traceWorkload } from './trace.js';
import { treeOfThoughtParamsSchema, treeOfThoughtWorkload } from './tree-of-thought.js';
import type { ClientDriver } from './types.js';

export type { ChatMessage, ClientDriver, ScheduledRequest, WorkloadRequest } from './types.js';

/** Params validated by a workload's schema, bound to its factory: call it with a seed per run. */
export type BoundWorkload = (seed: number) => ClientDriver;

export type BindResult = { success: true; create: BoundWorkload } | { success: false; error: z.ZodError };

export interface WorkloadType {
  readonly type: string;
  readonly schema: z.ZodType;
  /** The schema has a `durationS` a scenario fills in from its own when absent. */
  readonly takesDuration: boolean;
  /** Params that are file paths (a scenario resolves them against its own folder). */
  readonly pathParams: readonly string[];
  /**
   * Validate raw params (without `type`); on success the factory bound to them, at `loadScale`×
   * the load (src/workloads/load-scale.ts; default 1: the params as given, never touched).
   */
  bind(params: unknown, loadScale?: number): BindResult;
}

/** The error of binding a type that has no load rule at a multiple other than 1. */
function notScalable(type: string, k: number): BindResult {
  return {
    success: false,
    error: new z.ZodError([
      {
        code: 'custom',
        path: ['type'],
        message: `workload type '${type}' does not say what ×${k} its load is, so it cannot be swept (--rate-scale)`,
        input: type,
      },
    ]),
  };
}

function define<S extends z.ZodType>(
  type: string,
  schema: S,
  // The factories take their input type and parse again (cheap, idempotent), so they are
  // convenient to call from code; a parsed output is always a valid input.
  factory: (params: z.output<S>, seed: number) => ClientDriver,
  opts: { takesDuration: boolean; pathParams?: readonly string[]; scale?: LoadScaler<z.output<S>> },
): WorkloadType {
  return {
    type,
    schema,
    takesDuration: opts.takesDuration,
    pathParams: opts.pathParams ?? [],
    bind(params: unknown, loadScale = 1): BindResult {
      const r = schema.safeParse(params);
      if (!r.success) return { success: false, error: r.error };
      if (loadScale !== 1 && !opts.scale) return notScalable(type, loadScale);
      // ×1 is the params as parsed: a plain run and a sweep's ×1 build the same driver.
      const data = loadScale === 1 || !opts.scale ? r.data : opts.scale(r.data, loadScale);
      // The last seed's driver, when reusable (open loop): a scenario's runs, one per policy,
      // then generate their requests once, not once each.
      let last: { readonly seed: number; readonly driver: ClientDriver } | undefined;
      const create = (seed: number): ClientDriver => {
        if (last !== undefined && last.seed === seed) return last.driver;
        const driver = factory(data, seed);
        last = driver.reusable === true ? { seed, driver } : undefined;
        return driver;
      };
      return { success: true, create };
    },
  };
}

const registry = new Map<string, WorkloadType>(
  [
    define('constant', constantParamsSchema, constantWorkload, { takesDuration: true, scale: scaleConstant }),
    define('poisson', poissonParamsSchema, poissonWorkload, { takesDuration: true, scale: scalePoisson }),
    define('bursts', burstsParamsSchema, burstsWorkload, { takesDuration: true, scale: scaleBursts }),
    define('bursty', burstyParamsSchema, burstyWorkload, { takesDuration: true, scale: scaleBursty }),
    define('heimdall', heimdallParamsSchema, heimdallWorkload, {
      takesDuration: false,
      scale: scaleHeimdall,
    }),
    define('multi-turn', multiTurnParamsSchema, multiTurnWorkload, {
      takesDuration: true,
      scale: scaleMultiTurn,
    }),
    define('tree-of-thought', treeOfThoughtParamsSchema, treeOfThoughtWorkload, {
      takesDuration: true,
      scale: scaleTreeOfThought,
    }),
    define('task-mix', taskMixParamsSchema, taskMixWorkload, { takesDuration: true, scale: scaleTaskMix }),
    define('trace', traceParamsSchema, traceWorkload, {
      takesDuration: true,
      pathParams: ['path'],
      scale: scaleTrace,
    }),
    define('prefix-heavy', prefixHeavyParamsSchema, prefixHeavyWorkload, {
      takesDuration: true,
      scale: scalePrefixHeavy,
    }),
  ].map((w) => [w.type, w]),
);

/** A part of a `mix` workload, bound through the registry at ×k (a nested mix is allowed). */
const bindPartAt =
  (loadScale: number): PartBinder =>
  (spec) => {
    const { type, ...params } = spec;
    const w = typeof type === 'string' ? registry.get(type) : undefined;
    if (!w) {
      return {
        success: false,
        error: new z.ZodError([
          {
            code: 'custom',
            path: ['type'],
            message: `unknown workload type '${String(type)}' (known: ${workloadTypeNames().join(', ')})`,
            input: type,
          },
        ]),
      };
    }
    return w.bind(params, loadScale);
  };

// Several populations side by side; each part is checked against its own type's schema.
registry.set('mix', {
  type: 'mix',
  schema: mixParamsSchema,
  takesDuration: true,
  pathParams: [],
  // ×k: each part by its own type's rule (a part that has none fails the bind, naming itself).
  bind(params: unknown, loadScale = 1): BindResult {
    const bindPart = bindPartAt(loadScale);
    const error = checkMixParams(params, bindPart);
    if (error) return { success: false, error };
    const data = mixParamsSchema.parse(params);
    return { success: true, create: (seed) => mixWorkload(data, seed, bindPart) };
  },
});

export function workloadTypeNames(): string[] {
  return [...registry.keys()];
}

export function getWorkloadType(type: string): WorkloadType | undefined {
  return registry.get(type);
}

/**
 * Build a driver from a `{ type, …params }` spec written in code. Throws an Error naming an
 * unknown type, or the ZodError of bad params.
 */
export function createWorkload(
  spec: { readonly type: string } & Record<string, unknown>,
  seed: number,
): ClientDriver {
  const { type, ...params } = spec;
  const w = registry.get(type);
  if (!w) throw new Error(`unknown workload type '${type}' (known: ${workloadTypeNames().join(', ')})`);
  const r = w.bind(params);
  if (!r.success) throw r.error;
  return r.create(seed);
}

export { burstsParamsSchema, burstsWorkload } from './bursts.js';
export { burstyParamsSchema, burstyWorkload } from './bursty.js';
export { constantParamsSchema, constantWorkload } from './constant.js';
export { heimdallParamsSchema, heimdallWorkload } from './heimdall.js';
export { mixParamsSchema, mixWorkload } from './mix.js';
export { multiTurnParamsSchema, multiTurnWorkload } from './multi-turn.js';
export { poissonParamsSchema, poissonWorkload } from './poisson.js';
export { prefixHeavyParamsSchema, prefixHeavyTraceLines, prefixHeavyWorkload } from './prefix-heavy.js';
export { SEED_004_TASKS, taskMixParamsSchema, taskMixWorkload } from './task-mix.js';
export { parseTrace, TraceError, traceParamsSchema, traceWorkload } from './trace.js';
export { treeOfThoughtParamsSchema, treeOfThoughtWorkload, treeSize } from './tree-of-thought.js';
