import type { Policy } from '../core/types.js';
import type { Scenario } from '../scenario/types.js';
import { simulateWith } from './simulator.js';

export interface OracleResult {
  readonly evaluated: number;
  readonly best: { readonly meanLatencyS: number; readonly assignment: readonly string[] };
  readonly worst: { readonly meanLatencyS: number; readonly assignment: readonly string[] };
}

/** Most assignments the oracle will try (2^16: 16 requests on 2 backends). */
export const ORACLE_LIMIT = 1 << 16;

/** A pseudo-policy that sends the k-th request (in arrival order) to a fixed backend. */
function fixed(assignment: readonly string[]): Policy {
  let k = 0;
  return {
    name: 'fixed',
    pick(_req, candidates) {
      const want = assignment[k++];
      return candidates.find((c) => c.name === want);
    },
  };
}

/**
 * The physical limit of routing on a small scenario: every assignment of its requests to its
 * backends, each simulated with the engine model (requests pushed on arrival), best and worst
 * mean latency reported. Requests must all complete for an assignment to count.
 */
export function exhaustiveOracle(scenario: Scenario, opts: { seed: number }): OracleResult {
  const first = simulateWith(scenario, fixed([]), 'probe', opts);
  const n = first.records.length;
  const names = scenario.fleet.map((b) => b.name);
  const total = names.length ** n;
  if (total > ORACLE_LIMIT) {
    throw new Error(`oracle: ${names.length}^${n} = ${total} assignments is over the limit of ${ORACLE_LIMIT}`);
  }
  let best = { meanLatencyS: Infinity, assignment: [] as string[] };
  let worst = { meanLatencyS: -Infinity, assignment: [] as string[] };
  let evaluated = 0;
  for (let code = 0; code < total; code++) {
    const assignment: string[] = [];
    for (let i = 0, c = code; i < n; i++, c = Math.floor(c / names.length)) assignment.push(names[c % names.length]!);
    const run = simulateWith(scenario, fixed(assignment), 'fixed', opts);
    const done = run.records.filter((r) => r.ok === true);
    if (done.length !== n) continue;
    evaluated++;
    const mean = done.reduce((a, r) => a + (r.finishS! - r.arrivalS), 0) / n;
    if (mean < best.meanLatencyS) best = { meanLatencyS: mean, assignment };
    if (mean > worst.meanLatencyS) worst = { meanLatencyS: mean, assignment };
  }
  return { evaluated, best, worst };
}
