/**
 * One reading of a policy as people write it — in a config file, a scenario, or the body of
 * PUT /admin/policy — and one way to point at a YAML problem, so the three say the same thing in
 * the same words.
 */
import { isMap, isSeq, type Document, type LineCounter } from 'yaml';
import { z } from 'zod';

/** A policy by name with its parameters (`{}` for a bare name). */
export interface PolicySpec {
  readonly name: string;
  readonly params: Readonly<Record<string, unknown>>;
}

export type SpecPath = readonly (string | number)[];

/** A policy spec that cannot be read; `path` is relative to the spec (`[]`, `['params']`, …). */
export class PolicySpecError extends Error {
  override readonly name = 'PolicySpecError';
  constructor(
    message: string,
    readonly path: SpecPath = [],
  ) {
    super(message);
  }
}

export const POLICY_SHAPE = 'must be a policy name or an object { name: <policy>, ...params }';

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * `least-connections`, `{ name: estimated-wait, alpha: 0.3 }` or `{ name: estimated-wait,
 * params: { alpha: 0.3 } }`. The parameters themselves are the policy's to check (createPolicy).
 * Throws PolicySpecError.
 */
export function parsePolicySpec(raw: unknown): PolicySpec {
  if (typeof raw === 'string') {
    if (raw.trim() === '') throw new PolicySpecError(POLICY_SHAPE);
    return { name: raw, params: {} };
  }
  if (!isRecord(raw)) throw new PolicySpecError(POLICY_SHAPE);
  if (!Object.hasOwn(raw, 'name')) throw new PolicySpecError(POLICY_SHAPE);
  const { name, ...rest } = raw;
  if (typeof name !== 'string' || name.trim() === '')
    throw new PolicySpecError('must be a non-empty string', ['name']);
  if (!Object.hasOwn(rest, 'params')) return { name, params: { ...rest } };
  const { params, ...others } = rest;
  if (!isRecord(params)) throw new PolicySpecError('must be an object of the policy parameters', ['params']);
  const extra = Object.keys(others)[0];
  if (extra !== undefined)
    throw new PolicySpecError('unknown key (give parameters either under params or beside name)', [extra]);
  return { name, params: { ...params } };
}

/** parsePolicySpec as a schema field: its problems become issues at their place in the file. */
export const policySpecSchema = z.unknown().transform((v, ctx): PolicySpec => {
  try {
    return parsePolicySpec(v);
  } catch (err) {
    if (!(err instanceof PolicySpecError)) throw err;
    ctx.issues.push({ code: 'custom', message: err.message, input: v, path: [...err.path] });
    return z.NEVER;
  }
});

/**
 * Line and column (1-based) of `path` in a YAML document: of the key itself when the last step is
 * a key that is there (an unknown key is pointed at, not its value), else of the deepest part of
 * the path the document has (a missing field points at its parent).
 */
export function yamlPosition(
  doc: Document,
  lc: LineCounter,
  path: SpecPath,
): { line: number; col: number } | undefined {
  for (let n = path.length; n >= 0; n--) {
    const node: unknown = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
    let range = (node as { range?: readonly number[] | null } | undefined)?.range;
    if (n === path.length && n > 0) {
      const parent: unknown = n === 1 ? doc.contents : doc.getIn(path.slice(0, n - 1), true);
      if (isMap(parent)) {
        const pair = parent.items.find((p) => (p.key as { value?: unknown } | null)?.value === path[n - 1]);
        const keyRange = (pair?.key as { range?: readonly number[] | null } | null)?.range;
        if (keyRange) range = keyRange;
      } else if (isSeq(parent)) {
        range =
          (parent.items[path[n - 1] as number] as { range?: readonly number[] } | undefined)?.range ?? range;
      }
    }
    if (range) {
      const pos = lc.linePos(range[0]!);
      return { line: pos.line, col: pos.col };
    }
  }
  return undefined;
}

/** What every loader says for a key its schema does not know. */
export const UNKNOWN_KEY = 'unknown key';
