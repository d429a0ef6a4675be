import { readFileSync } from 'node:fs';
import { isMap, isNode, isPair, isScalar, LineCounter, parseDocument, type Document } from 'yaml';
import type { z } from 'zod';
import {
  backendSchema,
  configSchema,
  normalize,
  normalizeBackend,
  type BackendEntry,
  type RouterConfig,
} from './schema.js';

export type { BackendEntry, RouterConfig } from './schema.js';

export interface ConfigIssue {
  /** Dotted path like `backends[1].url`; empty for the whole document. */
  readonly path: string;
  readonly message: string;
  readonly line?: number | undefined;
}

/** A configuration that can't be used; the message names every bad field (and its line). */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly source: string,
    readonly issues: readonly ConfigIssue[],
  ) {
    super(
      `invalid config ${source}:\n` +
        issues
          .map(
            (i) =>
              `  ${i.path || '(document)'}${i.line !== undefined ? ` (line ${i.line})` : ''}: ${i.message}`,
          )
          .join('\n'),
    );
  }
}

export interface PolicyValidation {
  /** Policy names the running build knows. */
  readonly knownPolicies: readonly string[];
  /** Builds the policy once so bad parameters are reported at load; throws with the reason. */
  readonly validatePolicy?: (spec: { name: string; params: Record<string, unknown> }) => void;
}

export interface ParseOptions extends PolicyValidation {
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

/** The 1-based line of the node at `path` (or of `key` inside it), when the document has one. */
function lineOf(
  doc: Document | undefined,
  lc: LineCounter | undefined,
  path: readonly PathKey[],
  key?: string,
): number | undefined {
  if (!doc || !lc) return undefined;
  // Walk as deep as the document goes: a missing field points at its parent.
  let node: unknown = doc.contents;
  let at: number | undefined = isNode(node) ? node.range?.[0] : undefined;
  for (const k of path) {
    const next: unknown =
      isNode(node) && 'get' in node
        ? (node as { get(k: unknown, keep: true): unknown }).get(k, true)
        : undefined;
    if (next === undefined) break;
    node = next;
    if (isNode(node) && node.range) at = node.range[0];
  }
  if (key !== undefined && isMap(node)) {
    for (const item of node.items) {
      if (isPair(item) && isScalar(item.key) && item.key.value === key && item.key.range)
        at = item.key.range[0];
    }
  }
  return at === undefined ? undefined : lc.linePos(at).line;
}

function zodIssues(
  error: z.ZodError,
  doc?: Document,
  lc?: LineCounter,
  prefix: readonly PathKey[] = [],
): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  for (const issue of error.issues) {
    const path = [...prefix, ...(issue.path as PathKey[])];
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        out.push({
          path: formatPath([...path, key]),
          message: 'unknown key',
          line: lineOf(doc, lc, path, key),
        });
      }
      continue;
    }
    out.push({ path: formatPath(path), message: issue.message, line: lineOf(doc, lc, path) });
  }
  return out;
}

/** Parse and validate a YAML (or JSON) configuration. Throws ConfigError. */
export function parseConfig(text: string, opts: ParseOptions): RouterConfig {
  const source = opts.source ?? 'config';
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      source,
      doc.errors.map((e) => {
        const pos = e.linePos?.[0];
        return { path: '', message: e.message.split('\n')[0] ?? e.message, line: pos?.line };
      }),
    );
  }
  const raw: unknown = doc.toJS();
  const parsed = configSchema.safeParse(raw ?? {});
  if (!parsed.success) throw new ConfigError(source, zodIssues(parsed.error, doc, lc));
  const cfg = normalize(parsed.data);

  const issues: ConfigIssue[] = [];
  const seen = new Map<string, number>();
  cfg.backends.forEach((b, i) => {
    const first = seen.get(b.name);
    if (first !== undefined) {
      issues.push({
        path: `backends[${i}].name`,
        message: `duplicate backend name '${b.name}' (also backends[${first}])`,
        line: lineOf(doc, lc, ['backends', i, 'name']),
      });
    } else seen.set(b.name, i);
  });
  const policyLine = lineOf(doc, lc, ['policy']);
  if (!opts.knownPolicies.includes(cfg.policy.name)) {
    issues.push({
      path: 'policy',
      message: `unknown policy '${cfg.policy.name}' (known: ${opts.knownPolicies.join(', ')})`,
      line: policyLine,
    });
  } else if (opts.validatePolicy) {
    try {
      opts.validatePolicy({ name: cfg.policy.name, params: { ...cfg.policy.params } });
    } catch (err) {
      issues.push({ path: 'policy', message: (err as Error).message, line: policyLine });
    }
  }
  if (issues.length > 0) throw new ConfigError(source, issues);
  return cfg;
}

export function loadConfigFile(path: string, opts: PolicyValidation): RouterConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(path, [{ path: '', message: `cannot read file: ${(err as Error).message}` }]);
  }
  return parseConfig(text, { ...opts, source: path });
}

/** One backend entry as the config file spells it (admin API: POST /admin/backends). Throws ConfigError. */
export function parseBackendEntry(body: unknown): BackendEntry {
  const r = backendSchema.safeParse(body);
  if (!r.success) throw new ConfigError('backend', zodIssues(r.error));
  return normalizeBackend(r.data);
}

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * Environment (`LLMLB_*`) and command-line overrides: flags win over env, env over the file.
 * Returns a new config; a bad value is a ConfigError naming the variable.
 */
export function applyOverrides(
  cfg: RouterConfig,
  env: Readonly<Record<string, string | undefined>>,
  cli: { host?: string | undefined; port?: number | undefined },
  opts?: PolicyValidation,
): RouterConfig {
  const issues: ConfigIssue[] = [];
  const int = (name: string, min: number, max: number): number | undefined => {
    const v = env[name];
    if (v === undefined || v === '') return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max) {
      issues.push({ path: name, message: `must be an integer in [${min}, ${max}] (got '${v}')` });
      return undefined;
    }
    return n;
  };
  const host = cli.host ?? (env.LLMLB_HOST || undefined);
  const port = cli.port ?? int('LLMLB_PORT', 0, 65535);
  const attempts = int('LLMLB_RETRY_ATTEMPTS', 1, 20);
  const level = env.LLMLB_LOG_LEVEL || undefined;
  if (level !== undefined && !LEVELS.includes(level)) {
    issues.push({ path: 'LLMLB_LOG_LEVEL', message: `must be one of ${LEVELS.join(', ')} (got '${level}')` });
  }
  const policy = env.LLMLB_POLICY || undefined;
  if (policy !== undefined && opts && !opts.knownPolicies.includes(policy)) {
    issues.push({
      path: 'LLMLB_POLICY',
      message: `unknown policy '${policy}' (known: ${opts.knownPolicies.join(', ')})`,
    });
  }
  const token = env.LLMLB_ADMIN_TOKEN || undefined;
  if (issues.length > 0) throw new ConfigError('environment', issues);
  return {
    ...cfg,
    server: {
      ...cfg.server,
      ...(host !== undefined ? { host } : {}),
      ...(port !== undefined ? { port } : {}),
    },
    retry: { ...cfg.retry, ...(attempts !== undefined ? { attempts } : {}) },
    log: { ...cfg.log, ...(level !== undefined ? { level } : {}) },
    ...(policy !== undefined ? { policy: { name: policy, params: {} } } : {}),
    ...(token !== undefined ? { admin: { ...cfg.admin, token } } : {}),
  };
}
