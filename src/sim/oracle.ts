/**
 * The exhaustive oracle (the performance-aware router Fig. 2): for a small open-loop scenario, simulate every assignment
 * of its requests to its backends with the engine model and report the best and worst achievable
 * mean latency — the physical limit of routing, against which each policy can be placed.
 */
import { HOLD } from '../core/types.js';
import type { Policy } from '../core/types.js';
import type { Scenario } from '../scenario/types.js';
import type { ClientDriver, ScheduledRequest } from '../workloads/types.js';
import { simulateWith } from './simulator.js';

export interface OracleAssignment {
  readonly meanLatencyS: number;
  /** Backend of each request, in arrival order. */
  readonly assignment: readonly string[];
}

export interface OracleResult {
  /** Assignments simulated in which every request completed. */
  readonly evaluated: number;
  /** Assignments skipped because some request did not finish within durationS + graceS. */
  readonly incomplete: number;
  readonly requests: number;
  readonly backends: readonly string[];
  readonly best: OracleAssignment;
  readonly worst: OracleAssignment;
  /** Mean over all evaluated assignments: the expected latency of a uniformly random assignment. */
  readonly randomMeanLatencyS: number;
}

/** Most assignments the oracle will try (2^16: 16 requests on 2 backends, 8 on 4). */
export const ORACLE_LIMIT = 1 << 16;

/** backends^requests, or Infinity once it passes the limit (no overflow for big cases). */
export function assignmentCount(backends: number, requests: number): number {
  let total = 1;
  for (let i = 0; i < requests; i++) {
    total *= backends;
    if (total > ORACLE_LIMIT) return Infinity;
  }
  return total;
}

/** A pseudo-policy that sends the k-th request to arrive to `assignment[k]`. */
function fixed(assignment: readonly string[]): Policy {
  const order = new Map<string, number>();
  return {
    name: 'fixed',
    pick(req, candidates) {
      let k = order.get(req.id);
      if (k === undefined) {
        k = order.size;
        order.set(req.id, k);
      }
      const want = assignment[k];
      return candidates.find((c) => c.name === want) ?? HOLD.retry;
    },
  };
}

/**
 * The scenario with its requests generated once (not per assignment) and no router caps, so each
 * request is pushed to its assigned backend the moment it arrives; the engine's own slots, KV and
 * pending queue still apply.
 */
function pinnedScenario(scenario: Scenario, seed: number): { scenario: Scenario; requests: number } {
  const sends: ScheduledRequest[] = scenario
    .createDriver(seed)
    .start()
    .filter((s) => s.at < scenario.durationS);
  const driver = (): ClientDriver => ({ start: () => sends, onFinish: () => [] });
  const fleet = scenario.fleet.map((b) => ({ ...b, maxConcurrency: Infinity }));
  return {
    scenario: {
      name: scenario.name,
      description: scenario.description,
      seed: scenario.seed,
      fleet,
      durationS: scenario.durationS,
      graceS: scenario.graceS,
      policies: scenario.policies,
      timeScale: scenario.timeScale,
      createDriver: driver,
    },
    requests: sends.length,
  };
}

/**
 * Simulate every assignment; throws when there are more than ORACLE_LIMIT of them, when the
 * workload is closed-loop (its requests depend on when earlier ones finish, so "an assignment of
 * its requests" is not defined), or when no assignment completes every request.
 */
export function exhaustiveOracle(scenario: Scenario, opts: { seed: number }): OracleResult {
  const names = scenario.fleet.map((b) => b.name);
  const { scenario: sc, requests: n } = pinnedScenario(scenario, opts.seed);
  const total = assignmentCount(names.length, n);
  if (!Number.isFinite(total)) {
    throw new Error(
      `oracle: ${names.length}^${n} assignments (${n} requests on ${names.length} backends) is over the limit of ${ORACLE_LIMIT}`,
    );
  }
  // A closed-loop client sends follow-ups when requests finish: run it once with every request
  // dispatched (to the first candidate) and see whether more were sent than it started with.
  const first: Policy = { name: 'first', pick: (_req, candidates) => candidates[0] ?? HOLD.retry };
  const probe = simulateWith(scenario, first, 'first', {
    seed: opts.seed,
    probeEveryS: Infinity,
    sampleEveryS: Infinity,
  });
  if (probe.records.length !== n) {
    throw new Error(
      `oracle: scenario '${scenario.name}' is closed-loop (follow-up requests); it needs an open-loop workload`,
    );
  }
  // The fixed policy never reads engine metrics and charts are not drawn: no probes, no samples.
  const simOpts = { seed: opts.seed, probeEveryS: Infinity, sampleEveryS: Infinity };
  let best: OracleAssignment | undefined;
  let worst: OracleAssignment | undefined;
  let evaluated = 0;
  let sum = 0;
  const digits = new Array<number>(n).fill(0);
  for (let code = 0; code < total; code++) {
    // Mixed-radix counter: request i's backend is digit i.
    const assignment = digits.map((d) => names[d]!);
    for (let i = 0; i < n; i++) {
      if (++digits[i]! < names.length) break;
      digits[i] = 0;
    }
    const run = simulateWith(sc, fixed(assignment), 'fixed', simOpts);
    let latency = 0;
    let done = 0;
    for (const r of run.records) {
      if (r.ok === true) {
        done++;
        latency += r.finishS! - r.arrivalS;
      }
    }
    if (done !== n) continue;
    evaluated++;
    const mean = n === 0 ? 0 : latency / n;
    sum += mean;
    // Strict comparisons: the first assignment in counting order wins ties (deterministic).
    if (!best || mean < best.meanLatencyS) best = { meanLatencyS: mean, assignment };
    if (!worst || mean > worst.meanLatencyS) worst = { meanLatencyS: mean, assignment };
  }
  if (!best || !worst) {
    throw new Error(`oracle: no assignment completes all ${n} requests within durationS + graceS`);
  }
  return {
    evaluated,
    incomplete: total - evaluated,
    requests: n,
    backends: names,
    best,
    worst,
    randomMeanLatencyS: sum / evaluated,
  };
}
