import { z } from 'zod';
import './builtin-plugins.js';
import type { Filter, Picker, Plugin } from './plugin.js';
import {
  ENDPOINT_PICKER_API_VERSIONS,
  PLUMBING_PLUGIN_TYPES,
  UNSUPPORTED_PLUGIN_TYPES,
  currentPluginType,
} from './llm-d-compat.js';
import { pluginFactory, pluginTypes } from './plugins.js';
import { ProfilePolicy, type DynamicWeightRule, type WeightedScorer } from './profile.js';

/**
 * Scheduling profiles in the YAML shape of llm-d's `EndpointPickerConfig` (Heimdall's Heimdall
 * config loads as written, and so do llm-d's own, under either apiVersion: llm-d-compat.ts).
 * `dynamicWeights` on a profile is our extension (Heimdall, key feature 2). A profile's name can
 * then be used as `policy:`.
 */
const pluginSchema = z.strictObject({
  type: z.string().min(1),
  name: z.string().min(1).optional(),
  parameters: z.record(z.string(), z.unknown()).optional(),
});

const refSchema = z.strictObject({
  pluginRef: z.string().min(1),
  /** Scorers only; default 1 (llm-d's default). */
  weight: z.number().min(0).optional(),
});

const ruleSchema = z.strictObject({
  signal: z.enum(['maxEngineWaiting', 'maxInFlight', 'inFlightSpread', 'ttftSloMissRatio']),
  above: z.number().min(0),
  below: z.number().min(0).optional(),
  set: z.record(z.string(), z.number().min(0)),
  ttftSloMs: z.number().positive().optional(),
  window: z.number().int().positive().max(100_000).optional(),
});

const profileSchema = z.strictObject({
  name: z.string().min(1),
  plugins: z.array(refSchema).min(1),
  dynamicWeights: z.array(ruleSchema).optional(),
});

export const endpointPickerConfigSchema = z.strictObject({
  apiVersion: z
    .enum(ENDPOINT_PICKER_API_VERSIONS, {
      error: (iss) =>
        `unknown apiVersion ${JSON.stringify(iss.input)}: an EndpointPickerConfig is ${ENDPOINT_PICKER_API_VERSIONS.map((v) => `'${v}'`).join(' or ')}`,
    })
    .optional(),
  kind: z.literal('EndpointPickerConfig').optional(),
  plugins: z.array(pluginSchema).min(1),
  schedulingProfiles: z.array(profileSchema).min(1),
  /** llm-d's request parsers: plumbing plugins here (llmlb parses bodies itself), refs checked. */
  requestHandler: z
    .strictObject({ parsers: z.array(z.strictObject({ pluginRef: z.string().min(1) })).optional() })
    .optional(),
});

export type EndpointPickerConfig = z.output<typeof endpointPickerConfigSchema>;

/** A config problem with the path of the offending field inside the EndpointPickerConfig. */
export class ProfileConfigError extends Error {
  constructor(
    readonly path: readonly (string | number)[],
    message: string,
  ) {
    super(message);
  }
}

const nameOf = (p: EndpointPickerConfig['plugins'][number]): string => p.name ?? p.type;

/** Names of the config's plumbing plugins (llm-d-compat.ts): loaded, never run. */
function plumbingNames(cfg: EndpointPickerConfig): Map<string, string> {
  const out = new Map<string, string>();
  for (const p of cfg.plugins) {
    const type = currentPluginType(p.type).type;
    if (PLUMBING_PLUGIN_TYPES.has(type)) out.set(nameOf(p), type);
  }
  return out;
}

/** Deprecation warnings for the config's old plugin type names (the config loads all the same). */
export function endpointPickerWarnings(cfg: EndpointPickerConfig): string[] {
  const out: string[] = [];
  cfg.plugins.forEach((p, i) => {
    const d = currentPluginType(p.type).deprecated;
    if (d !== undefined) out.push(`plugins[${i}]: ${d}`);
  });
  return out;
}

/** Instantiates every plugin of the config (fresh state), in order; later ones may look up earlier ones. */
function instantiate(cfg: EndpointPickerConfig, random: () => number): Map<string, Plugin> {
  const byName = new Map<string, Plugin>();
  const pending = new Map(cfg.plugins.map((p, i) => [nameOf(p), { p, i }]));
  const build = (name: string): Plugin | undefined => {
    const done = byName.get(name);
    if (done) return done;
    const entry = pending.get(name);
    if (!entry) return undefined;
    pending.delete(name); // a cycle then resolves to undefined instead of recursing forever
    const type = currentPluginType(entry.p.type).type;
    if (PLUMBING_PLUGIN_TYPES.has(type)) return undefined;
    const factory = pluginFactory(type);
    if (!factory) {
      const why = UNSUPPORTED_PLUGIN_TYPES.get(type);
      const as = type === entry.p.type ? '' : ` (now '${type}')`;
      throw new ProfileConfigError(
        ['plugins', entry.i, 'type'],
        why !== undefined
          ? `llm-d plugin '${entry.p.type}'${as} cannot run in llmlb: ${why}`
          : `unknown plugin type '${entry.p.type}' (known: ${[...pluginTypes(), ...PLUMBING_PLUGIN_TYPES.keys()].sort().join(', ')})`,
      );
    }
    let plugin: Plugin;
    try {
      plugin = factory({ name, params: entry.p.parameters ?? {}, random, lookup: build });
    } catch (err) {
      if (err instanceof ProfileConfigError) throw err;
      throw new ProfileConfigError(['plugins', entry.i, 'parameters'], (err as Error).message);
    }
    byName.set(name, plugin);
    return plugin;
  };
  for (const p of cfg.plugins) build(nameOf(p));
  return byName;
}

/** Checks what the schema cannot (unique names, known refs, one picker, rules naming scorers); throws. */
export function checkEndpointPickerConfig(cfg: EndpointPickerConfig): void {
  const seen = new Set<string>();
  cfg.plugins.forEach((p, i) => {
    const n = nameOf(p);
    if (seen.has(n))
      throw new ProfileConfigError(['plugins', i], `duplicate plugin name '${n}' (give one a \`name\`)`);
    seen.add(n);
  });
  const profiles = new Set<string>();
  cfg.schedulingProfiles.forEach((p, i) => {
    if (profiles.has(p.name))
      throw new ProfileConfigError(['schedulingProfiles', i, 'name'], `duplicate profile '${p.name}'`);
    profiles.add(p.name);
  });
  // Plumbing plugins may carry llm-d's parameters: they are not read. Parsers must be plugins.
  const plumbing = plumbingNames(cfg);
  cfg.requestHandler?.parsers?.forEach((r, i) => {
    if (!plumbing.has(r.pluginRef))
      throw new ProfileConfigError(
        ['requestHandler', 'parsers', i, 'pluginRef'],
        `'${r.pluginRef}' is not a parser plugin of this config`,
      );
  });
  // Building every profile once validates plugin parameters and the wiring.
  for (const p of cfg.schedulingProfiles) buildProfile(cfg, p.name, () => 0.5);
}

export function profileNames(cfg: EndpointPickerConfig | undefined): string[] {
  return cfg ? cfg.schedulingProfiles.map((p) => p.name) : [];
}

/** A fresh policy for one profile of the config (fresh plugin state: each run or reload starts clean). */
export function buildProfile(
  cfg: EndpointPickerConfig,
  profile: string,
  random: () => number,
): ProfilePolicy {
  const pi = cfg.schedulingProfiles.findIndex((p) => p.name === profile);
  if (pi < 0) throw new ProfileConfigError(['schedulingProfiles'], `no scheduling profile '${profile}'`);
  const prof = cfg.schedulingProfiles[pi]!;
  const plugins = instantiate(cfg, random);
  const plumbing = plumbingNames(cfg);
  const filters: Filter[] = [];
  const scorers: WeightedScorer[] = [];
  let picker: Picker | undefined;
  prof.plugins.forEach((ref, ri) => {
    const path = ['schedulingProfiles', pi, 'plugins', ri];
    const p = plugins.get(ref.pluginRef);
    const plumbingType = plumbing.get(ref.pluginRef);
    if (!p && plumbingType !== undefined)
      throw new ProfileConfigError(
        [...path, 'pluginRef'],
        `'${ref.pluginRef}' (${plumbingType}) is not a filter, scorer or picker: llmlb loads it and does nothing (${PLUMBING_PLUGIN_TYPES.get(plumbingType)}), so leave it out of the profile`,
      );
    if (!p)
      throw new ProfileConfigError(
        [...path, 'pluginRef'],
        `no plugin named '${ref.pluginRef}' (plugins: ${[...plugins.keys()].join(', ')})`,
      );
    if (ref.weight !== undefined && p.kind !== 'scorer')
      throw new ProfileConfigError(
        [...path, 'weight'],
        `'${ref.pluginRef}' is a ${p.kind}: only scorers take a weight`,
      );
    if (p.kind === 'filter') filters.push(p);
    else if (p.kind === 'scorer') scorers.push({ scorer: p, weight: ref.weight ?? 1 });
    else {
      if (picker) throw new ProfileConfigError(path, `profile '${prof.name}' has two pickers`);
      picker = p;
    }
  });
  if (!picker) {
    const factory = pluginFactory('max-score-picker')!;
    picker = factory({ name: 'max-score-picker', params: {}, random, lookup: () => undefined }) as Picker;
  }
  const rules: DynamicWeightRule[] = (prof.dynamicWeights ?? []).map((r, k) => {
    for (const name of Object.keys(r.set)) {
      if (!scorers.some((s) => s.scorer.name === name))
        throw new ProfileConfigError(
          ['schedulingProfiles', pi, 'dynamicWeights', k, 'set', name],
          `'${name}' is not a scorer of profile '${prof.name}'`,
        );
    }
    if (r.signal === 'ttftSloMissRatio' && r.ttftSloMs === undefined)
      throw new ProfileConfigError(
        ['schedulingProfiles', pi, 'dynamicWeights', k, 'ttftSloMs'],
        'ttftSloMissRatio needs ttftSloMs',
      );
    return r;
  });
  return new ProfilePolicy({ name: prof.name, filters, scorers, picker, dynamicWeights: rules });
}
