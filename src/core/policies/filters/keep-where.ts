import type { BackendView } from '../../types.js';

/**
 * A filter's answer: the candidates `ok` keeps, in order. When all pass (the common case) it is
 * the input itself; otherwise `into` refilled — one array per filter, reused from pick to pick
 * (the profile reads a filter's answer before calling it again; a fleet of 1000 would otherwise
 * leave 8 KB of garbage per decision) — or a new one when the input is `into` itself (the same
 * filter twice in a chain).
 */
export function keepWhere(
  candidates: readonly BackendView[],
  ok: (b: BackendView, now: number) => boolean,
  now: number,
  into: BackendView[],
): readonly BackendView[] {
  let i = 0;
  while (i < candidates.length && ok(candidates[i]!, now)) i++;
  if (i === candidates.length) return candidates;
  const out = candidates === into ? [] : into;
  out.length = 0;
  for (let j = 0; j < i; j++) out.push(candidates[j]!);
  for (i++; i < candidates.length; i++) if (ok(candidates[i]!, now)) out.push(candidates[i]!);
  return out;
}
