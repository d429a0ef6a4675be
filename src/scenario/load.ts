/**
 * Scenario files: what `llmlb simulate` and `llmlb bench` run. YAML (JSON is YAML too), validated
 * once here with strict schemas; every error names the field path and, when the field exists in the
 * file, its line.
 *
 * ```yaml
 * name: ollamarouter-2node          # [A-Za-z0-9._-]; used in results and file names
 * description: …                    # optional
 * seed: 1                           # default seed (the CLI's --seed overrides); default 1
 * durationS: 2400                   # requests are sent during [0, durationS)
 * graceS: 1800                      # then wait up to graceS for them to finish; default 0
 * timeScale: 20                     # suggested speed-up for live `bench` (model s per real s); default 1
 * defaults:                         # optional; merged under every fleet entry
 *   profile: { slots: 1 }           # EngineProfile fields (src/engine/types.ts), over defaultProfile()
 *                                   #   (pagedKv: true = vLLM/SGLang-style shared prefix KV;
 *                                   #   cacheMode: slots = llama.cpp's one kept prompt per slot)
 *   models: [llama3]                # default [llama3]
 *   region: us-east                 # also maxConcurrency, weight
 * fleet:                            # one entry per kind of backend
 *   - name: fast                    # unique after expansion
 *     profile: { speed: 1 }
 *   - name: slow
 *     count: 4                      # count > 1 → slow-0 … slow-3
 *     profile: { speed: 0.2 }
 *     models: [llama3]
 *     region: eu-west
 *     maxConcurrency: 8             # router-side cap on requests pushed at once; default none
 *     weight: 1                     # default 1
 * workload:                         # a generator (src/workloads/index.ts) by type, with its params
 *   type: constant                  # constant | poisson | bursts | heimdall | multi-turn |
 *   rate: 0.025                     #   tree-of-thought | task-mix | trace
 *   model: llama3                   # generators' durationS defaults to the scenario's
 * policies:                         # compared in order; a name, or a name with its params
 *   - round-robin
 *   - { name: estimated-wait, alpha: 0.3 }   # or { name: …, params: { alpha: 0.3 } }
 * rateScales: [1, 2, 3, 4]          # optional: `simulate` sweeps these load multiples (as --rate-scale;
 *                                   #   what ×k means per workload: src/workloads/load-scale.ts)
 * ```
 * Policy names are not checked against the registry here (later policies register themselves; the
 * simulate command validates them). A trace's relative `path` is resolved against the scenario
 * file's folder.
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { LineCounter, parseDocument, type Document } from 'yaml';
import { z } from 'zod';
import type { PolicySpec } from '../core/policies/index.js';
import { policySpecSchema, UNKNOWN_KEY, yamlPosition } from '../config/policy-spec.js';
import { didYouMean } from '../config/suggest.js';
import {
  checkEndpointPickerConfig,
  endpointPickerConfigSchema,
  ProfileConfigError,
} from '../core/policies/framework/endpoint-picker-config.js';
import { defaultProfile } from '../engine/profile.js';
import { EngineProfilePatch } from './profile-file.js';
import type { EngineProfile } from '../engine/types.js';
import { getWorkloadType, workloadTypeNames, type BoundWorkload } from '../workloads/index.js';
import type { Scenario, ScenarioBackend } from './types.js';
import { buildRegions, regionsSection, routersSection, type ScenarioRegions } from './federation.js';

type Path = readonly (string | number)[];

/** A scenario that cannot be used; `field` is the dotted path of the first problem. */
export class ScenarioError extends Error {
  constructor(
    message: string,
    readonly source: string,
    readonly field?: string,
    readonly line?: number,
    readonly column?: number,
  ) {
    super(message);
    this.name = 'ScenarioError';
  }
}

/** `fleet[1].profile.slots` */
export function formatPath(path: Path): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${p}` : p;
  return out;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const name = z.string().regex(NAME, 'must be letters, digits, . _ - (starting with a letter or digit)');

const backendFields = {
  profile: EngineProfilePatch.optional(),
  models: z.array(z.string().min(1)).min(1).optional(),
  region: z.string().min(1).optional(),
  maxConcurrency: z.number().int().positive().optional(),
  weight: z.number().finite().positive().optional(),
};

const FleetEntry = z.strictObject({ name, count: z.number().int().positive().default(1), ...backendFields });

const ScenarioFile = z.strictObject({
  name,
  description: z.string().optional(),
  seed: z.number().int().nonnegative().default(1),
  durationS: z.number().finite().positive(),
  graceS: z.number().finite().nonnegative().default(0),
  timeScale: z.number().finite().positive().default(1),
  defaults: z.strictObject(backendFields).optional(),
  fleet: z.array(FleetEntry).min(1),
  workload: z.looseObject({ type: z.string().min(1) }),
  // A name, `{ name, ...params }` or `{ name, params }`: read as the config's policy is.
  policies: z.array(policySpecSchema).min(1),
  // Scheduling profiles a policy entry may name (llm-d EndpointPickerConfig shape).
  scheduling: endpointPickerConfigSchema.optional(),
  // More than one router (src/scenario/federation.ts).
  regions: regionsSection.optional(),
  routers: routersSection.optional(),
  // A load sweep `simulate` runs when no --rate-scale is given.
  rateScales: z.array(z.number().finite().positive()).min(1).optional(),
});

interface Problem {
  readonly path: Path;
  readonly message: string;
}

/**
 * zod issues → problems; an unknown key is reported at the key itself, with the closest known key
 * of `schema` at that place when one is a typo away.
 */
function problems(error: z.ZodError, prefix: Path = [], schema?: z.ZodType): Problem[] {
  return error.issues.flatMap((i): Problem[] => {
    const path = [...prefix, ...(i.path as (string | number)[])];
    if (i.code === 'unrecognized_keys') {
      const at = i.path as (string | number)[];
      const hint = (k: string): string => (schema === undefined ? '' : didYouMean(schema, at, k));
      return i.keys.map((k) => ({ path: [...path, k], message: UNKNOWN_KEY + hint(k) }));
    }
    return [{ path, message: i.message }];
  });
}

function fail(source: string, doc: Document, lc: LineCounter, list: readonly Problem[]): never {
  const lines = list.slice(0, 8).map((p) => {
    const where = yamlPosition(doc, lc, p.path);
    const field = formatPath(p.path);
    return {
      text: `${source}${where ? `:${where.line}:${where.col}` : ''}: ${field ? `${field}: ` : ''}${p.message}`,
      where,
    };
  });
  const first = list[0]!;
  const more = list.length > 8 ? `\n(and ${list.length - 8} more)` : '';
  throw new ScenarioError(
    lines.map((l) => l.text).join('\n') + more,
    source,
    formatPath(first.path) || undefined,
    lines[0]!.where?.line,
    lines[0]!.where?.col,
  );
}

/** A LoRA engine serves its adapters too: a request naming one may go to any replica that has it. */
function withAdapters(models: readonly string[], profile: EngineProfile): readonly string[] {
  const adapters = profile.lora?.adapters;
  if (!adapters || adapters.length === 0) return models;
  return [...models, ...adapters.filter((a) => !models.includes(a))];
}

/** The workload section's generator, bound to its validated params (problems if not). */
function bindWorkload(
  section: unknown,
  durationS: unknown,
  baseDir: string,
  loadScale: number,
): { create?: BoundWorkload; problems: Problem[] } {
  // A section that is not an object, or has no string type, is the top-level schema's to report.
  if (section === null || typeof section !== 'object' || Array.isArray(section)) return { problems: [] };
  const { type, ...params } = section as Record<string, unknown>;
  if (typeof type !== 'string') return { problems: [] };
  const wt = getWorkloadType(type);
  if (!wt) {
    const message = `unknown workload type '${type}' (known: ${workloadTypeNames().join(', ')})`;
    return { problems: [{ path: ['workload', 'type'], message }] };
  }
  if (wt.takesDuration && params.durationS === undefined && typeof durationS === 'number') {
    params.durationS = durationS;
  }
  for (const key of wt.pathParams) {
    const v = params[key];
    if (typeof v === 'string' && !isAbsolute(v)) params[key] = resolve(baseDir, v);
  }
  const bound = wt.bind(params, loadScale);
  if (!bound.success) return { problems: problems(bound.error, ['workload'], wt.schema) };
  return { create: bound.create, problems: [] };
}

/** How to read a scenario. */
export interface ScenarioLoadOptions {
  /**
   * Its workload at this multiple of its load (a sweep's ×k: src/workloads/load-scale.ts);
   * default 1, the file as written.
   */
  readonly rateScale?: number | undefined;
}

/** Parse and validate scenario text. `source` names it in errors and anchors relative paths. */
export function parseScenario(text: string, source: string, opts: ScenarioLoadOptions = {}): Scenario {
  const loadScale = opts.rateScale ?? 1;
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    const pos = e.linePos?.[0];
    const message = e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?\s*$/, '');
    throw new ScenarioError(
      `${source}${pos ? `:${pos.line}:${pos.col}` : ''}: invalid YAML: ${message}`,
      source,
      undefined,
      pos?.line,
      pos?.col,
    );
  }
  const raw: unknown = doc.toJS();
  // Validate the file and its workload section together, so one run reports both kinds of mistake.
  const parsed = ScenarioFile.safeParse(raw);
  const rawObj = raw !== null && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  const baseDir = source.startsWith('<') ? process.cwd() : dirname(resolve(source));
  const workload = bindWorkload(rawObj.workload, rawObj.durationS, baseDir, loadScale);
  const found = [...(parsed.success ? [] : problems(parsed.error, [], ScenarioFile)), ...workload.problems];
  if (found.length > 0 || !parsed.success || !workload.create) {
    fail(source, doc, lc, found.length > 0 ? found : [{ path: ['workload'], message: 'invalid workload' }]);
  }
  const s = parsed.data;
  const create: BoundWorkload = workload.create;

  // Fleet: merge profiles (built-in ← defaults ← entry) and expand counts.
  const d = s.defaults ?? {};
  const fleet: ScenarioBackend[] = [];
  const seen = new Map<string, number>();
  s.fleet.forEach((e, i) => {
    const profile = defaultProfile({ ...d.profile, ...e.profile });
    for (let k = 0; k < e.count; k++) {
      const backendName = e.count > 1 ? `${e.name}-${k}` : e.name;
      const dup = seen.get(backendName);
      if (dup !== undefined) {
        fail(source, doc, lc, [
          {
            path: ['fleet', i, 'name'],
            message: `backend name '${backendName}' is already used by fleet[${dup}]`,
          },
        ]);
      }
      seen.set(backendName, i);
      fleet.push({
        name: backendName,
        profile,
        models: withAdapters(e.models ?? d.models ?? ['llama3'], profile),
        ...(profile.lora?.adapters?.length ? { adapters: profile.lora.adapters } : {}),
        region: e.region ?? d.region,
        maxConcurrency: e.maxConcurrency ?? d.maxConcurrency ?? Infinity,
        weight: e.weight ?? d.weight ?? 1,
      });
    }
  });

  // Build one driver now, so file-backed workloads (traces) fail at load rather than mid-run, and
  // check that every model its first requests name (defaults included) is served by someone.
  let models: Set<string>;
  try {
    models = new Set(
      create(s.seed)
        .start()
        .map((r) => r.request.model),
    );
  } catch (err) {
    fail(source, doc, lc, [{ path: ['workload'], message: (err as Error).message }]);
  }
  for (const model of models) {
    if (!fleet.some((b) => b.models.includes(model))) {
      fail(source, doc, lc, [
        { path: ['workload', 'model'], message: `no backend in the fleet serves model '${model}'` },
      ]);
    }
  }

  if (s.scheduling) {
    try {
      checkEndpointPickerConfig(s.scheduling);
    } catch (err) {
      if (!(err instanceof ProfileConfigError)) throw err;
      fail(source, doc, lc, [{ path: ['scheduling', ...err.path], message: err.message }]);
    }
  }

  let regions: ScenarioRegions | undefined;
  if (s.regions) {
    if (s.routers) fail(source, doc, lc, [{ path: ['routers'], message: 'use either regions or routers' }]);
    const built = buildRegions(
      s.regions,
      fleet.map((b) => b.region),
      (clients, idPrefix) => {
        const w = rawObj.workload as Record<string, unknown>;
        const b = bindWorkload({ ...w, clients, idPrefix }, rawObj.durationS, baseDir, loadScale);
        return (
          b.create ??
          b.problems.map((p) => `workload.${formatPath(p.path.slice(1))}: ${p.message}`).join('; ')
        );
      },
    );
    if (!built.regions) fail(source, doc, lc, built.problems);
    regions = built.regions;
  }

  const policies: PolicySpec[] = s.policies.map((p) =>
    Object.keys(p.params).length > 0 ? p : { name: p.name },
  );

  return {
    name: s.name,
    description: s.description,
    seed: s.seed,
    fleet,
    durationS: s.durationS,
    graceS: s.graceS,
    policies,
    scheduling: s.scheduling,
    timeScale: s.timeScale,
    createDriver: create,
    regions,
    routers: s.routers && { count: s.routers.count, syncS: s.routers.syncMs / 1000 },
    ...(s.rateScales ? { rateScales: s.rateScales } : {}),
    ...(loadScale !== 1 ? { rateScale: loadScale } : {}),
  };
}

/** Read and validate a scenario file (errors: ScenarioError, including for an unreadable file). */
export function loadScenario(path: string, opts: ScenarioLoadOptions = {}): Scenario {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ScenarioError(
      `${path}: cannot read scenario (${(err as NodeJS.ErrnoException).code ?? String(err)})`,
      path,
    );
  }
  return parseScenario(text, path, opts);
}
