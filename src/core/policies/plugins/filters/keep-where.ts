import type { BackendView } from '../../../types.js';

/** The answer when no candidate passes (selective pushing holding the request): shared, never written. */
const NONE: readonly BackendView[] = Object.freeze([]);

/**
 * A filter's answer: the candidates `ok` keeps, in order. When all pass (the common case) it is
 * the input itself, when none pass (a hold) one shared empty array; otherwise `into` refilled —
 * one array per filter, reused from pick to pick (the profile reads a filter's answer before
 * calling it again; a fleet of 1000 would otherwise leave 8 KB of garbage per decision) — or a new
 * one when the input is `into` itself (the same filter twice in a chain).
 */
export function keepWhere(
  candidates: readonly BackendView[],
  ok: (b: BackendView, now: number) => boolean,
  now: number,
  into: BackendView[],
): readonly BackendView[] {
  const n = candidates.length;
  let i = 0;
  while (i < n && ok(candidates[i]!, now)) i++;
  if (i === n) return candidates;
  // candidates[i] fails; the next that passes, if any.
  let j = i + 1;
  while (j < n && !ok(candidates[j]!, now)) j++;
  if (i === 0 && j === n) return NONE;
  const out = candidates === into ? [] : into;
  // Written by index and truncated only if it was longer: setting an array's length calls into
  // the runtime, which a hold re-asked on every completion would pay each time.
  let k = 0;
  for (let x = 0; x < i; x++) out[k++] = candidates[x]!;
  if (j < n) out[k++] = candidates[j]!;
  for (j++; j < n; j++) if (ok(candidates[j]!, now)) out[k++] = candidates[j]!;
  if (out.length !== k) out.length = k;
  return out;
}
