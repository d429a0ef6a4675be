/**
 * "Did you mean `X`?" for an unknown config key: the keys the schema accepts at that place, and
 * the closest by edit distance when it is close enough to be a typo.
 */
import type { z } from 'zod';

/** Optimal string alignment distance: insertions, deletions, substitutions, adjacent swaps. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  return d[a.length]![b.length]!;
}

/**
 * The known key closest to `key`, when a typo could explain it: at most one edit per three
 * characters (one for short keys, never more than three). Case is ignored.
 */
export function closestKey(key: string, known: Iterable<string>): string | undefined {
  const limit = Math.min(3, Math.max(1, Math.floor(key.length / 3)));
  let best: string | undefined;
  let bestD = Infinity;
  for (const k of known) {
    const dist = editDistance(key.toLowerCase(), k.toLowerCase());
    if (dist < bestD) [best, bestD] = [k, dist];
  }
  return bestD <= limit ? best : undefined;
}

/** The zod internals walked here (zod 4's `_zod.def`). */
interface Def {
  readonly type: string;
  readonly shape?: Record<string, z.ZodType>;
  readonly innerType?: z.ZodType;
  readonly in?: z.ZodType;
  readonly element?: z.ZodType;
  readonly options?: readonly z.ZodType[];
  readonly valueType?: z.ZodType;
  readonly items?: readonly z.ZodType[];
  readonly left?: z.ZodType;
  readonly right?: z.ZodType;
  readonly getter?: () => z.ZodType;
}

const defOf = (s: z.ZodType): Def => (s as unknown as { _zod: { def: Def } })._zod.def;

/** The schemas a value at `path` may be checked against (a union gives several). */
function schemasAt(schema: z.ZodType, path: readonly PropertyKey[], depth = 0): z.ZodType[] {
  if (depth > 64) return [];
  const def = defOf(schema);
  const again = (s: z.ZodType | undefined, p = path): z.ZodType[] =>
    s === undefined ? [] : schemasAt(s, p, depth + 1);
  switch (def.type) {
    case 'optional':
    case 'nullable':
    case 'default':
    case 'prefault':
    case 'readonly':
    case 'catch':
    case 'nonoptional':
      return again(def.innerType);
    case 'pipe':
      return again(def.in);
    case 'lazy':
      return again(def.getter?.());
    case 'union':
      return (def.options ?? []).flatMap((o) => again(o));
    case 'intersection':
      return [...again(def.left), ...again(def.right)];
  }
  if (path.length === 0) return [schema];
  const [head, ...rest] = path;
  switch (def.type) {
    case 'object':
      return typeof head === 'string' ? again(def.shape?.[head], rest) : [];
    case 'record':
      return again(def.valueType, rest);
    case 'array':
      return typeof head === 'number' ? again(def.element, rest) : [];
    case 'tuple':
      return typeof head === 'number' ? again(def.items?.[head], rest) : [];
    default:
      return [];
  }
}

/** The keys an object at `path` may have, per the schema (empty when it cannot tell). */
export function knownKeysAt(schema: z.ZodType, path: readonly PropertyKey[]): Set<string> {
  const keys = new Set<string>();
  for (const s of schemasAt(schema, path)) {
    const def = defOf(s);
    if (def.type === 'object') for (const k of Object.keys(def.shape ?? {})) keys.add(k);
  }
  return keys;
}

/** `; did you mean \`X\`?` for an unknown key at `path`, or '' when no known key is close. */
export function didYouMean(schema: z.ZodType, path: readonly PropertyKey[], key: string): string {
  const best = closestKey(key, knownKeysAt(schema, path));
  return best === undefined ? '' : `; did you mean \`${best}\`?`;
}
