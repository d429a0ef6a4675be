import './builtin-plugins.js';
import type { Policy, PolicyContext, PolicyParams } from '../types.js';
import { buildProfile, profileNames, type EndpointPickerConfig } from './endpoint-picker-config.js';
import { estimatedWait } from './estimated-wait.js';
import { ollamaRouter } from './ollama-router.js';
import { parseParams } from './params.js';
import type { PluginContext } from './plugin.js';
import { pluginFactory } from './plugins.js';
import { policyPicker } from './pickers/policy-picker.js';
import { pinned } from './pinned.js';
import { ProfilePolicy, type ProfileDefinition } from './profile.js';
import { z } from 'zod';

export type { EndpointPickerConfig } from './endpoint-picker-config.js';

/** A built-in policy: a profile assembled in code from the same plugins a config can name. */
type BuiltinProfile = (ctx: PolicyContext) => Omit<ProfileDefinition, 'name'>;

const plugin = <K extends 'picker' | 'scorer'>(
  type: string,
  ctx: PolicyContext,
  params: PolicyParams = {},
): Extract<ReturnType<NonNullable<ReturnType<typeof pluginFactory>>>, { kind: K }> => {
  const pctx: PluginContext = { name: type, params, random: ctx.random, lookup: () => undefined };
  return pluginFactory(type)!(pctx) as Extract<
    ReturnType<NonNullable<ReturnType<typeof pluginFactory>>>,
    { kind: K }
  >;
};

/** Built-ins that take no parameters reject any, so a typo in YAML is reported. */
const noParams = (name: string, ctx: PolicyContext): void =>
  void parseParams(z.strictObject({}), ctx.params, name);

const builtins = new Map<string, BuiltinProfile>([
  [
    'round-robin',
    (ctx) => (
      noParams('round-robin', ctx),
      { filters: [], scorers: [], picker: plugin<'picker'>('round-robin-picker', ctx) }
    ),
  ],
  [
    'least-connections',
    (ctx) => {
      noParams('least-connections', ctx);
      // Fewest in flight (never expiring: the router sees every completion), ties round-robin.
      return {
        filters: [],
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
]);

/** Built-in policy names (a config's scheduling profiles add theirs). */
export function policyNames(scheduling?: EndpointPickerConfig): string[] {
  return [...builtins.keys(), ...profileNames(scheduling)];
}

/** Add a built-in profile (embedders, later issues). */
export function registerPolicy(name: string, build: BuiltinProfile): void {
  builtins.set(name, build);
}

/** A policy as written in config: a bare name, or a name with its parameters. */
export interface PolicySpec {
  readonly name: string;
  readonly params?: PolicyParams;
}

/**
 * Build a policy: a scheduling profile of the config, else a built-in one. Throws an Error naming
 * the problem for an unknown name or bad parameters, so config load can call it once and report it.
 */
export function createPolicy(
  spec: PolicySpec | string,
  random: () => number,
  scheduling?: EndpointPickerConfig,
): Policy {
  const s: PolicySpec = typeof spec === 'string' ? { name: spec } : spec;
  if (scheduling && profileNames(scheduling).includes(s.name)) {
    if (s.params && Object.keys(s.params).length > 0)
      throw new Error(`policy '${s.name}' is a scheduling profile: set parameters on its plugins, not here`);
    return buildProfile(scheduling, s.name, random);
  }
  const build = builtins.get(s.name);
  if (!build) throw new Error(`unknown policy '${s.name}' (known: ${policyNames(scheduling).join(', ')})`);
  const def = build({ random, params: s.params ?? {} });
  return new ProfilePolicy({ name: s.name, ...def });
}
