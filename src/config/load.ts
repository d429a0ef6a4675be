import { readFileSync } from 'node:fs';
import { LineCounter, parseDocument, type Document, type YAMLError } from 'yaml';
import type { z } from 'zod';
import { backendRefs } from '../core/policies/index.js';
import {
  checkEndpointPickerConfig,
  endpointPickerConfigSchema,
  endpointPickerWarnings,
  profileNames,
  ProfileConfigError,
  type EndpointPickerConfig,
} from '../core/policies/framework/endpoint-picker-config.js';
import {
  backendSchema,
  configSchema,
  DEFAULT_POLICY,
  LOG_LEVELS,
  normalize,
  normalizeBackend,
  type BackendEntry,
  type LogLevel,
  type PolicySpec,
  type RouterConfig,
} from './schema.js';
import { parsePolicySpec, PolicySpecError, UNKNOWN_KEY, yamlPosition } from './policy-spec.js';
import { checkFederationConfig } from './federation.js';
import { didYouMean } from './suggest.js';

export type { ApiKind, BackendEntry, LogLevel, PolicySpec, RouterConfig } from './schema.js';

export interface ConfigIssue {
  /** Dotted path like `backends[1].url`, an override's name (`LLMLB_PORT`, `--port`), or '' for the document. */
  readonly path: string;
  readonly message: string;
  /** 1-based line in the file, when the problem has a place in it. */
  readonly line?: number | undefined;
  /** 1-based column; given for syntax errors. */
  readonly column?: number | undefined;
}

function formatIssue(i: ConfigIssue): string {
  const at =
    i.line === undefined
      ? ''
      : i.column === undefined
        ? ` (line ${i.line})`
        : ` (line ${i.line}, column ${i.column})`;
  return `  ${i.path || '(document)'}${at}: ${i.message}`;
}

/** A configuration that can't be used; the message names every bad field (and its line). */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    /** The file, or `overrides` for environment and flags. */
    readonly source: string,
    readonly issues: readonly ConfigIssue[],
  ) {
    super(`invalid config ${source}:\n${issues.map(formatIssue).join('\n')}`);
  }
}

export interface PolicyValidation {
  /** Built-in policy names the running build knows (a config's scheduling profiles add theirs). */
  readonly knownPolicies: readonly string[];
  /** Builds the policy once so bad parameters are reported at load; throws with the reason. */
  readonly validatePolicy?: (
    spec: { name: string; params: Record<string, unknown> },
    scheduling: EndpointPickerConfig | undefined,
  ) => void;
}

export interface ParseOptions extends PolicyValidation {
  /** File name for messages; a `.json` name selects strict JSON parsing. */
  readonly source?: string;
}

type PathKey = string | number;

export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const k of path) {
    if (typeof k === 'number') out += `[${k}]`;
    else out += out === '' ? String(k) : `.${String(k)}`;
  }
  return out;
}

/** The parsed document kept beside the data, only to turn issue paths into line numbers. */
interface Positions {
  readonly doc: Document;
  readonly lc: LineCounter;
}

/** The 1-based line of the node at `path` (or of `key` inside it), when the document has one. */
function lineOf(pos: Positions | undefined, path: readonly PathKey[], key?: string): number | undefined {
  if (!pos) return undefined;
  return yamlPosition(pos.doc, pos.lc, key === undefined ? path : [...path, key])?.line;
}

/** "Invalid input: expected string, received undefined" says less than "required". */
const requiredMessage = (iss: z.core.$ZodRawIssue): string | undefined =>
  iss.code === 'invalid_type' && iss.input === undefined ? 'required' : undefined;

function zodIssues(error: z.ZodError, schema: z.ZodType, pos?: Positions): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  for (const issue of error.issues) {
    const path = issue.path as PathKey[];
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        out.push({
          path: formatPath([...path, key]),
          message: UNKNOWN_KEY + didYouMean(schema, path, key),
          line: lineOf(pos, path, key),
        });
      }
      continue;
    }
    out.push({ path: formatPath(path), message: issue.message, line: lineOf(pos, path) });
  }
  return out;
}

function yamlIssue(e: YAMLError): ConfigIssue {
  const first = e.message.split('\n')[0] ?? e.message;
  const where = e.linePos?.[0];
  return {
    path: '',
    // The position goes into line/column; drop yaml's own copy of it from the text.
    message: first.replace(/ at line \d+, column \d+:?$/, ''),
    line: where?.line,
    column: where?.col,
  };
}

function jsonIssue(err: unknown, text: string): ConfigIssue {
  const msg = err instanceof Error ? err.message : String(err);
  // V8 says "... at position N" (Node 22 adds "(line L column C)"); end of input has no position.
  const m = / at position (\d+)/.exec(msg);
  const offset = m ? Number(m[1]) : text.length;
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - before.lastIndexOf('\n');
  return { path: '', message: msg.replace(/ at position \d+.*$/, ''), line, column };
}

type JsonAttempt =
  { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly issue: ConfigIssue };

/**
 * The file's data, plus the YAML document for line numbers. JSON is YAML, but YAML accepts what
 * JSON does not (trailing commas, bare words): a `.json` file is held to JSON, and a file that
 * starts with `{` gets JSON's error when it is neither JSON nor YAML.
 */
function readText(text: string, source: string): { raw: unknown; pos?: Positions } {
  const body = text.replace(/^\uFEFF/, '');
  const jsonFile = /\.json$/i.test(source);
  const looksJson = !/\.ya?ml$/i.test(source) && body.trimStart().startsWith('{');
  let json: JsonAttempt | undefined;
  if (jsonFile || looksJson) {
    try {
      json = { ok: true, value: JSON.parse(body) as unknown };
    } catch (err) {
      json = { ok: false, issue: jsonIssue(err, body) };
    }
    if (!json.ok && jsonFile) throw new ConfigError(source, [json.issue]);
  }
  const lc = new LineCounter();
  const doc = parseDocument(body, { lineCounter: lc, prettyErrors: true, uniqueKeys: true });
  if (json?.ok) {
    // JSON.parse keeps the last of two equal keys without a word; that is almost always a mistake.
    const dups = doc.errors.filter((e) => e.code === 'DUPLICATE_KEY');
    if (dups.length > 0) throw new ConfigError(source, dups.map(yamlIssue));
    return { raw: json.value, ...(doc.errors.length === 0 ? { pos: { doc, lc } } : {}) };
  }
  if (doc.errors.length > 0) {
    throw new ConfigError(source, json && !json.ok ? [json.issue] : doc.errors.map(yamlIssue));
  }
  return { raw: doc.toJS(), pos: { doc, lc } };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The policy as written, when its shape is right (the schema reports it otherwise). */
function rawPolicy(raw: Record<string, unknown>): PolicySpec | undefined {
  if (raw.policy === undefined) return { name: DEFAULT_POLICY, params: {} };
  try {
    return parsePolicySpec(raw.policy);
  } catch (err) {
    if (err instanceof PolicySpecError) return undefined;
    throw err;
  }
}

function policyIssue(
  spec: { name: string; params: Record<string, unknown> },
  opts: PolicyValidation,
  scheduling: EndpointPickerConfig | undefined,
): string | undefined {
  const known = [...opts.knownPolicies, ...profileNames(scheduling)];
  if (!known.includes(spec.name)) {
    return `unknown policy '${spec.name}' (known: ${known.join(', ') || 'none'})`;
  }
  try {
    opts.validatePolicy?.({ name: spec.name, params: { ...spec.params } }, scheduling);
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  return undefined;
}

/** What the schema can't say: unique backend names, a policy this build has, valid policy params. */
function crossChecks(raw: unknown, opts: PolicyValidation, pos: Positions | undefined): ConfigIssue[] {
  if (!isRecord(raw)) return [];
  const issues: ConfigIssue[] = [];
  // Backends are required unless an InferencePool's pods are discovered instead.
  const discovers = isRecord(raw.discovery) && raw.discovery.kubernetes !== undefined;
  if (
    !discovers &&
    (raw.backends === undefined || (Array.isArray(raw.backends) && raw.backends.length === 0))
  )
    issues.push({
      path: 'backends',
      message: raw.backends === undefined ? 'required' : 'at least one backend is required',
      line: lineOf(pos, ['backends']),
    });
  if (Array.isArray(raw.backends)) {
    const seen = new Map<string, number>();
    raw.backends.forEach((b: unknown, i) => {
      if (!isRecord(b) || typeof b.name !== 'string') return;
      const first = seen.get(b.name);
      if (first === undefined) seen.set(b.name, i);
      else
        issues.push({
          path: `backends[${i}].name`,
          message: `duplicate backend name '${b.name}' (also backends[${first}])`,
          line: lineOf(pos, ['backends', i, 'name']),
        });
    });
  }
  // Scheduling profiles: the schema checks the shape; here the wiring (refs, pickers, parameters).
  let scheduling: EndpointPickerConfig | undefined;
  if (raw.scheduling !== undefined) {
    const r = endpointPickerConfigSchema.safeParse(raw.scheduling);
    if (r.success) {
      try {
        checkEndpointPickerConfig(r.data);
        scheduling = r.data;
      } catch (err) {
        if (!(err instanceof ProfileConfigError)) throw err;
        issues.push({
          path: formatPath(['scheduling', ...err.path]),
          message: err.message,
          line: lineOf(pos, ['scheduling', ...err.path]),
        });
        return issues;
      }
      const clash = profileNames(scheduling).find((n) => opts.knownPolicies.includes(n));
      if (clash !== undefined)
        issues.push({
          path: 'scheduling.schedulingProfiles',
          message: `profile '${clash}' has a built-in policy's name: rename it`,
          line: lineOf(pos, ['scheduling', 'schedulingProfiles']),
        });
    } else return issues; // the schema's issues say what is wrong
  }
  const spec = rawPolicy(raw);
  const problem = spec && policyIssue(spec, opts, scheduling);
  if (problem !== undefined) {
    const defaulted = raw.policy === undefined ? ' (the default; set `policy`)' : '';
    issues.push({ path: 'policy', message: problem + defaulted, line: lineOf(pos, ['policy']) });
  } else if (spec && Array.isArray(raw.backends)) {
    // A pinned backend that is not in the file would hold every request in the queue.
    const names = new Set(raw.backends.map((b: unknown) => (isRecord(b) ? b.name : undefined)));
    for (const b of backendRefs(spec))
      if (!names.has(b))
        issues.push({
          path: 'policy.backend',
          message: `names unknown backend '${b}'`,
          line: lineOf(pos, ['policy', 'backend']),
        });
  }
  return issues;
}

/**
 * Parse and validate a YAML (or JSON) configuration, reporting every problem at once.
 * Throws ConfigError.
 */
export function parseConfig(text: string, opts: ParseOptions): RouterConfig {
  const source = opts.source ?? 'config';
  const { raw, pos } = readText(text, source);
  // An empty file is an empty mapping: the report is then "backends: required".
  const data = raw ?? {};
  const parsed = configSchema.safeParse(data, { error: requiredMessage });
  const issues = [
    ...(parsed.success ? [] : zodIssues(parsed.error, configSchema, pos)),
    ...crossChecks(data, opts, pos),
  ];
  if (parsed.success)
    for (const p of checkFederationConfig(parsed.data))
      issues.push({ path: p.path.join('.'), message: p.message, line: lineOf(pos, p.path) });
  if (issues.length > 0 || !parsed.success) {
    // In file order; issues without a line last (Array.prototype.sort is stable).
    issues.sort((a, b) => (a.line ?? Infinity) - (b.line ?? Infinity));
    throw new ConfigError(source, issues);
  }
  return normalize(parsed.data);
}

/** Read and parse a configuration file. Throws ConfigError (a missing file included). */
export function loadConfigFile(path: string, opts: PolicyValidation): RouterConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why = e.code === 'ENOENT' ? 'file not found' : `cannot read file: ${e.message}`;
    throw new ConfigError(path, [{ path: '', message: why }]);
  }
  return parseConfig(text, { ...opts, source: path });
}

/**
 * A standalone EndpointPickerConfig document (a Kubernetes ConfigMap's file, llm-d's or GIE's
 * samples as written): schema, wiring and parameters checked as `scheduling:` is. Returns the
 * config and its deprecation warnings (old plugin type names). Throws ConfigError.
 */
export function parseEndpointPickerConfig(
  text: string,
  source = 'EndpointPickerConfig',
): { config: EndpointPickerConfig; warnings: string[] } {
  const { raw, pos } = readText(text, source);
  const r = endpointPickerConfigSchema.safeParse(raw ?? {}, { error: requiredMessage });
  if (!r.success) throw new ConfigError(source, zodIssues(r.error, endpointPickerConfigSchema, pos));
  try {
    checkEndpointPickerConfig(r.data);
  } catch (err) {
    if (!(err instanceof ProfileConfigError)) throw err;
    throw new ConfigError(source, [
      { path: formatPath(err.path), message: err.message, line: lineOf(pos, err.path) },
    ]);
  }
  return { config: r.data, warnings: endpointPickerWarnings(r.data) };
}

/** One backend entry as the config file spells it (admin API: POST /admin/backends). Throws ConfigError. */
export function parseBackendEntry(body: unknown): BackendEntry {
  const r = backendSchema.safeParse(body, { error: requiredMessage });
  if (!r.success) throw new ConfigError('backend', zodIssues(r.error, backendSchema));
  return normalizeBackend(r.data);
}

export interface CliOverrides {
  readonly host?: string | undefined;
  readonly port?: number | undefined;
}

function isLogLevel(v: string): v is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(v);
}

/**
 * Environment (`LLMLB_HOST`, `LLMLB_PORT`, `LLMLB_POLICY`, `LLMLB_ADMIN_TOKEN`, `LLMLB_LOG_LEVEL`,
 * `LLMLB_RETRY_ATTEMPTS`) and command-line (`--host`, `--port`) overrides: flags win over env,
 * env over the file; an empty variable counts as unset. Returns a new config (the argument is
 * not touched); a bad value is a ConfigError naming the variable or flag. With `opts`, an
 * `LLMLB_POLICY` is checked like the file's policy.
 */
export function applyOverrides(
  cfg: RouterConfig,
  env: Readonly<Record<string, string | undefined>>,
  cli: CliOverrides,
  opts?: PolicyValidation,
): RouterConfig {
  const issues: ConfigIssue[] = [];
  const str = (name: string): string | undefined => {
    const v = env[name]?.trim();
    return v === undefined || v === '' ? undefined : v;
  };
  const int = (name: string, min: number, max: number): number | undefined => {
    const v = str(name);
    if (v === undefined) return undefined;
    // Number() would take '0x1f', '1e3' and '80.0'; an override is plain decimal digits.
    const n = /^\d+$/.test(v) ? Number(v) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      issues.push({ path: name, message: `must be an integer in [${min}, ${max}] (got '${v}')` });
      return undefined;
    }
    return n;
  };

  if (cli.host !== undefined && cli.host.trim() === '')
    issues.push({ path: '--host', message: 'must not be empty' });
  if (cli.port !== undefined && !(Number.isInteger(cli.port) && cli.port >= 0 && cli.port <= 65535)) {
    issues.push({ path: '--port', message: `must be an integer in [0, 65535] (got ${cli.port})` });
  }
  const host = cli.host ?? str('LLMLB_HOST');
  const envPort = int('LLMLB_PORT', 0, 65535);
  const port = cli.port ?? envPort;
  const attempts = int('LLMLB_RETRY_ATTEMPTS', 1, 20);

  const levelText = str('LLMLB_LOG_LEVEL');
  let level: LogLevel | undefined;
  if (levelText !== undefined) {
    if (isLogLevel(levelText)) level = levelText;
    else
      issues.push({
        path: 'LLMLB_LOG_LEVEL',
        message: `must be one of ${LOG_LEVELS.join(', ')} (got '${levelText}')`,
      });
  }

  const policyName = str('LLMLB_POLICY');
  let policy: PolicySpec | undefined;
  if (policyName !== undefined) {
    // Naming the file's own policy keeps the file's parameters for it.
    policy = policyName === cfg.policy.name ? cfg.policy : { name: policyName, params: {} };
    const problem =
      opts && policyIssue({ name: policy.name, params: { ...policy.params } }, opts, cfg.scheduling);
    if (problem !== undefined) issues.push({ path: 'LLMLB_POLICY', message: problem });
  }

  const token = str('LLMLB_ADMIN_TOKEN');
  if (issues.length > 0) throw new ConfigError('overrides', issues);
  return {
    ...cfg,
    server: {
      ...cfg.server,
      ...(host !== undefined ? { host } : {}),
      ...(port !== undefined ? { port } : {}),
    },
    retry: { ...cfg.retry, ...(attempts !== undefined ? { attempts } : {}) },
    log: { ...cfg.log, ...(level !== undefined ? { level } : {}) },
    ...(policy !== undefined ? { policy } : {}),
    ...(token !== undefined ? { admin: { ...cfg.admin, token } } : {}),
  };
}
