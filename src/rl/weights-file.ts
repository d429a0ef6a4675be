import { readFileSync } from 'node:fs';

/** The shipped weights: policies/ sits two levels up from both src/rl and dist/rl. */
export const SHIPPED_RL_WEIGHTS = new URL('../../policies/rl-mixed-4x.json', import.meta.url);

/**
 * The `rl` policy's weights reader, which hosts pass to createPolicy (`{ rlWeights: readRlWeights }`).
 * Read an `rl` policy's weights file (relative paths: from the working directory) at policy
 * creation — config load, PUT /admin/policy, simulate — never per request. A missing file or bad
 * JSON throws an Error saying which; the shape is checked by the policy (parseRlWeights).
 */
export function readRlWeights(file: string | undefined): unknown {
  const path = file ?? SHIPPED_RL_WEIGHTS;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new Error(e.code === 'ENOENT' ? 'no such file' : `cannot read (${e.code ?? e.message})`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new Error(`not valid JSON (${(err as Error).message})`);
  }
}
