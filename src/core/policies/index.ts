import './framework/builtin-plugins.js';
import type { Policy, PolicyContext, PolicyParams } from '../types.js';
import { buildProfile, profileNames, type EndpointPickerConfig } from './framework/endpoint-picker-config.js';
import { estimatedWait } from './builtin/estimated-wait/index.js';
import { jsq } from './builtin/jsq.js';
import { maxCapacity } from './builtin/max-capacity.js';
import { minMin } from './builtin/min-min.js';
import { workloadAware } from './builtin/workload-aware.js';
import { rl, type RlWeightsSource } from './builtin/rl.js';
import { ollamaRouter } from './builtin/ollama-router.js';
import { parseParams } from './framework/params.js';
import type { Filter, PluginContext } from './framework/plugin.js';
import { pluginFactory } from './framework/plugins.js';
import { policyPicker } from './plugins/pickers/policy-picker.js';
import { pinned } from './builtin/pinned.js';
import { ProfilePolicy, type ProfileDefinition } from './framework/profile.js';
import { z } from 'zod';

export type { EndpointPickerConfig } from './framework/endpoint-picker-config.js';

/**
 * What a host hands the policies that need the outside world (the core does no I/O itself): the
 * `rl` policy's weights reader (src/rl/weights-file.ts's readRlWeights). Absent: `rl` builds only
 * from a `weights:` document.
 */
export interface PolicyDeps {
  readonly rlWeights?: RlWeightsSource | undefined;
}

/** A built-in policy: a profile assembled in code from the same plugins a config can name. */
type BuiltinProfile = (ctx: PolicyContext, deps: PolicyDeps) => Omit<ProfileDefinition, 'name'>;

const plugin = <K extends 'picker' | 'scorer' | 'filter'>(
  type: string,
  ctx: PolicyContext,
  params: PolicyParams = {},
  name = type,
): Extract<ReturnType<NonNullable<ReturnType<typeof pluginFactory>>>, { kind: K }> => {
  const pctx: PluginContext = { name, params, random: ctx.random, lookup: () => undefined };
  return pluginFactory(type)!(pctx) as Extract<
    ReturnType<NonNullable<ReturnType<typeof pluginFactory>>>,
    { kind: K }
  >;
};

/** Built-ins that take no parameters reject any, so a typo in YAML is reported. */
const NO_PARAMS = z.strictObject({}); // built once: a zod schema costs tens of µs to make
const noParams = (name: string, ctx: PolicyContext): void => void parseParams(NO_PARAMS, ctx.params, name);

/** Selective-pushing parameters of a built-in, by push mode (SkyLB §3.3). */
const PUSH_PARAMS = {
  blind: [],
  'sp-o': ['maxOutstanding'],
  'sp-p': ['maxWaiting', 'probeIntervalMs', 'withoutMetricsMaxOutstanding'],
} as const;
type PushMode = keyof typeof PUSH_PARAMS;

/**
 * Splits a built-in's params into its push mode's filter (none for blind pushing; SP-O:
 * outstanding-filter; SP-P: pending-filter) and the rest, which go to the picker. A push
 * parameter given for another mode is an error, so `maxOutstanding` with `push: sp-p` is reported.
 */
function withPush(name: string, ctx: PolicyContext): { filters: Filter[]; rest: PolicyParams } {
  const { push = 'blind', ...others } = ctx.params;
  if (typeof push !== 'string' || !Object.hasOwn(PUSH_PARAMS, push))
    throw new Error(`policy '${name}' parameters: push: must be one of blind, sp-o, sp-p`);
  const mode = push as PushMode;
  // Null-prototype: parameter names come from config files and PUT /admin/policy bodies.
  const own: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  const rest: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [k, v] of Object.entries(others)) {
    if ((PUSH_PARAMS[mode] as readonly string[]).includes(k)) own[k] = v;
    else if (Object.values(PUSH_PARAMS).some((ks) => (ks as readonly string[]).includes(k)))
      throw new Error(`policy '${name}' parameters: ${k}: applies to another push mode, not '${mode}'`);
    else rest[k] = v;
  }
  const pctx: PluginContext = { name, params: own, random: ctx.random, lookup: () => undefined };
  const filters: Filter[] =
    mode === 'sp-o'
      ? [pluginFactory('outstanding-filter')!(pctx) as Filter]
      : mode === 'sp-p'
        ? [pluginFactory('pending-filter')!(pctx) as Filter]
        : [];
  return { filters, rest };
}

/** Built-ins whose only parameters are the push mode's. */
const pushOnly = (name: string, ctx: PolicyContext): Filter[] => {
  const { filters, rest } = withPush(name, ctx);
  noParams(name, { ...ctx, params: rest });
  return filters;
};

const builtins = new Map<string, BuiltinProfile>([
  [
    'round-robin',
    (ctx) => ({
      filters: pushOnly('round-robin', ctx),
      scorers: [],
      picker: plugin<'picker'>('round-robin-picker', ctx),
    }),
  ],
  [
    'least-connections',
    (ctx) => {
      const filters = pushOnly('least-connections', ctx);
      // Fewest in flight (never expiring: the router sees every completion), ties round-robin.
      return {
        filters,
        scorers: [
          { scorer: plugin<'scorer'>('active-request-scorer', ctx, { requestTimeout: 0 }), weight: 1 },
        ],
        picker: plugin<'picker'>('max-score-picker', ctx, { tieBreaking: 'round-robin' }),
      };
    },
  ],
  [
    'random',
    (ctx) => (
      noParams('random', ctx),
      { filters: [], scorers: [], picker: plugin<'picker'>('random-picker', ctx) }
    ),
  ],
  [
    'weighted-round-robin',
    (ctx) => (
      noParams('weighted-round-robin', ctx),
      { filters: [], scorers: [], picker: plugin<'picker'>('weighted-round-robin-picker', ctx) }
    ),
  ],
  ['ollama-router', (ctx) => ({ filters: [], scorers: [], picker: policyPicker(ollamaRouter(ctx)) })],
  ['estimated-wait', (ctx) => ({ filters: [], scorers: [], picker: policyPicker(estimatedWait(ctx)) })],
  ['pinned', (ctx) => ({ filters: [], scorers: [], picker: policyPicker(pinned(ctx)) })],
  // The performance-aware router: workload-aware routing (predicted answer length, mixing impact Eq. 1–2) and its baselines.
  ['jsq', (ctx) => ({ filters: [], scorers: [], picker: policyPicker(jsq(ctx)) })],
  ['max-capacity', maxCapacity],
  ['min-min', (ctx) => ({ filters: [], scorers: [], picker: policyPicker(minMin(ctx)) })],
  ['workload-aware', workloadAware],
  // The performance-aware router §4.3: the Double-DQN router (weights from `llmlb train`, read by the host).
  ['rl', (ctx, deps) => ({ filters: [], scorers: [], picker: policyPicker(rl(ctx, deps.rlWeights)) })],
  // SkyLB: prefix locality, each with blind pushing or selective pushing (push: sp-o / sp-p).
  [
    'prefix-trie',
    (ctx) => {
      const { filters, rest } = withPush('prefix-trie', ctx);
      return {
        filters,
        scorers: [],
        picker: plugin<'picker'>('prefix-trie-picker', ctx, rest, 'prefix-trie'),
      };
    },
  ],
  [
    'consistent-hash',
    (ctx) => {
      const { filters, rest } = withPush('consistent-hash', ctx);
      return {
        filters,
        scorers: [],
        picker: plugin<'picker'>('consistent-hash-picker', ctx, rest, 'consistent-hash'),
      };
    },
  ],
  // SGLang router's cache_aware policy: SkyLB §5.2's blind-pushing baseline, and with SP-P its
  // selective-pushing variant.
  [
    'sglang-cache-aware',
    (ctx) => {
      const { filters, rest } = withPush('sglang-cache-aware', ctx);
      return {
        filters,
        scorers: [],
        picker: plugin<'picker'>('sglang-cache-aware-picker', ctx, rest, 'sglang-cache-aware'),
      };
    },
  ],
]);

/** Built-in policy names (a config's scheduling profiles add theirs). */
export function policyNames(scheduling?: EndpointPickerConfig): string[] {
  return [...builtins.keys(), ...profileNames(scheduling)];
}

/** A policy as written in config: a bare name, or a name with its parameters. */
export interface PolicySpec {
  readonly name: string;
  readonly params?: PolicyParams;
}

/**
 * Backends a policy's parameters name (pinned's `backend`). Hosts check them against their
 * fleet: a pinned policy whose backend does not exist would hold every request forever.
 */
export function backendRefs(spec: PolicySpec): string[] {
  const p = spec.params;
  return spec.name === 'pinned' && p && Object.hasOwn(p, 'backend') && typeof p.backend === 'string'
    ? [p.backend]
    : [];
}

/**
 * Build a policy: a scheduling profile of the config, else a built-in one. Throws an Error naming
 * the problem for an unknown name or bad parameters, so config load can call it once and report it.
 * `deps`: what the host lends the policies that read files (the `rl` weights).
 */
export function createPolicy(
  spec: PolicySpec | string,
  random: () => number,
  scheduling?: EndpointPickerConfig,
  deps: PolicyDeps = {},
): Policy {
  const s: PolicySpec = typeof spec === 'string' ? { name: spec } : spec;
  if (scheduling && profileNames(scheduling).includes(s.name)) {
    if (s.params && Object.keys(s.params).length > 0)
      throw new Error(`policy '${s.name}' is a scheduling profile: set parameters on its plugins, not here`);
    return buildProfile(scheduling, s.name, random);
  }
  const build = builtins.get(s.name);
  if (!build) throw new Error(`unknown policy '${s.name}' (known: ${policyNames(scheduling).join(', ')})`);
  const def = build({ random, params: s.params ?? {} }, deps);
  return new ProfilePolicy({ name: s.name, ...def });
}
