/**
 * SLO sizing for `llmlb whatif`: an SLO (`--slo ttft-p90=2s,e2e-p99=30s`) parsed into terms,
 * whether a run meets it, and the recommendation — the fewest replicas at which some policy meets
 * it, and the best policy there. Pure: the command parses its flags and prints.
 */
import type { PolicyResult } from './results.js';

/** One SLO term: `ttft-p90=2s`, `e2e-p99=30s`, `latency-mean=500ms`. */
export interface SloTerm {
  readonly metric: 'ttftS' | 'latencyS';
  readonly stat: 'mean' | 'p50' | 'p90' | 'p95' | 'p99' | 'max';
  readonly limitS: number;
  readonly text: string;
}

/** An SLO text that is not METRIC-STAT=VALUE terms (the message names the term). */
export class SloError extends Error {
  override readonly name = 'SloError';
}

/** Parse an SLO (terms joined by commas, all must hold). Throws SloError. */
export function parseSlo(text: string): SloTerm[] {
  return text
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((t) => {
      const m = /^(ttft|e2e|latency)-(mean|p50|p90|p95|p99|max)=(\d+(?:\.\d+)?)(ms|s)?$/i.exec(t);
      if (!m)
        throw new SloError(
          `--slo: '${t}' is not METRIC-STAT=VALUE (metric ttft | e2e, stat mean | p50 | p90 | p95 | p99 | max, value in s or ms), e.g. ttft-p90=2s`,
        );
      const value = Number(m[3]) / (m[4]?.toLowerCase() === 'ms' ? 1000 : 1);
      return {
        metric: m[1]!.toLowerCase() === 'ttft' ? 'ttftS' : 'latencyS',
        stat: m[2]!.toLowerCase() as SloTerm['stat'],
        limitS: value,
        text: t,
      };
    });
}

/** A run meets the SLO: every term holds and (almost) every request completed. */
export function meetsSlo(r: PolicyResult, slo: readonly SloTerm[]): boolean {
  return r.completionRate >= 0.99 && slo.every((t) => r[t.metric][t.stat] <= t.limitS);
}

export interface Recommendation {
  readonly policy: string;
  readonly replicas: number;
  readonly slo: string | null;
  /** Why: the value of the first SLO term, or p90 TTFT without an SLO. */
  readonly reason: string;
}

/** What sizing needs of a run: its policy, replica count and results. */
export interface SizedRun {
  readonly policy: string;
  readonly replicas: number;
  readonly result: PolicyResult;
}

/** Seconds to the millisecond. */
const sec = (x: number): string => x.toFixed(3);

/**
 * Fewest replicas at which some policy meets the SLO, and the best policy there (by its first
 * term); without an SLO, the best p90 TTFT at the most replicas. Null: none meets it.
 */
export function recommend(
  runs: readonly SizedRun[],
  replicas: readonly number[],
  slo: readonly SloTerm[],
): Recommendation | null {
  const key = (r: SizedRun): number =>
    slo.length > 0 ? r.result[slo[0]!.metric][slo[0]!.stat] : r.result.ttftS.p90;
  const describe = (r: SizedRun): string =>
    slo.length > 0
      ? `${slo[0]!.metric === 'ttftS' ? 'ttft' : 'e2e'} ${slo[0]!.stat} ${sec(key(r))} s`
      : `best p90 TTFT at ${r.replicas} replicas: ${sec(key(r))} s`;
  if (slo.length === 0) {
    const at = replicas.at(-1)!;
    const best = runs.filter((r) => r.replicas === at).sort((a, b) => key(a) - key(b))[0];
    return best ? { policy: best.policy, replicas: at, slo: null, reason: describe(best) } : null;
  }
  for (const n of replicas) {
    const ok = runs
      .filter((r) => r.replicas === n && meetsSlo(r.result, slo))
      .sort((a, b) => key(a) - key(b));
    if (ok.length > 0)
      return {
        policy: ok[0]!.policy,
        replicas: n,
        slo: slo.map((t) => t.text).join(', '),
        reason: describe(ok[0]!),
      };
  }
  return null;
}
