import type { z } from 'zod';
import type { PolicyParams } from '../../types.js';

/**
 * Validate a policy's YAML parameters once, at construction (config load), never per request.
 * Throws an Error naming the policy and each bad parameter.
 */
export function parseParams<S extends z.ZodType>(
  schema: S,
  params: PolicyParams,
  policy: string,
): z.output<S> {
  const r = schema.safeParse(params);
  if (r.success) return r.data;
  const msg = r.error.issues
    .map((i) => `${i.path.length > 0 ? i.path.join('.') : '(params)'}: ${i.message}`)
    .join('; ');
  throw new Error(`policy '${policy}' parameters: ${msg}`);
}
