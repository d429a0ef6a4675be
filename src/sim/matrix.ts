/**
 * The policy matrix (issue #20): every built-in policy on every scenario, each judged against the
 * best baseline (round-robin, least-connections) of its scenario. What `npm run bench:matrix`
 * prints and what the CI matrix test checks, so a policy that loses to round robin somewhere is
 * named rather than found by a user.
 *
 * Latency is censored, not dropped: a request that failed or had not finished when the run ended
 * counts until the run's end (its first token too), so a policy cannot look fast by not serving.
 */
import {
  createPolicy,
  policyNames,
  type EndpointPickerConfig,
  type PolicySpec,
} from '../core/policies/index.js';
import { readRlWeights } from '../rl/weights-file.js';
import { ascending, percentile } from '../report/stats.js';
import { formatTable } from '../report/table.js';
import type { Scenario } from '../scenario/types.js';
import { policyLabel, simulate } from './simulator.js';

export const BASELINES = ['round-robin', 'least-connections'] as const;

/** One policy on one scenario. */
export interface MatrixCell {
  readonly scenario: string;
  readonly policy: string;
  readonly sent: number;
  readonly completed: number;
  /** Mean end-to-end seconds (censored, see above). */
  readonly meanE2eS: number;
  /** 90th percentile of time to first token, seconds (censored). */
  readonly ttftP90S: number;
}

/**
 * Built-in policies that run without parameters (pinned needs a backend: left out), in
 * registration order, so a policy added by a later issue joins the matrix on its own.
 */
export function matrixPolicies(): string[] {
  const out: string[] = [];
  for (const name of policyNames()) {
    try {
      createPolicy(name, () => 0.5, undefined, { rlWeights: readRlWeights });
      out.push(name);
    } catch {
      // needs parameters
    }
  }
  return out;
}

/** A shorter run of a scenario: sends stop at `durationS` (the drain keeps its grace). */
export function shortened(s: Scenario, durationS: number | undefined): Scenario {
  if (durationS === undefined || durationS >= s.durationS) return s;
  return { ...s, durationS };
}

function p90(xs: number[]): number {
  return xs.length === 0 ? 0 : percentile(ascending(xs), 0.9);
}

/**
 * Simulate one cell (seeded from the scenario). `profile` runs a scheduling profile of another
 * config (a scenario's or an example router config's `scheduling:` block) under `label`.
 */
export function runCell(
  scenario: Scenario,
  policy: PolicySpec | string,
  profile?: { readonly scheduling: EndpointPickerConfig; readonly label: string },
): MatrixCell {
  const spec = typeof policy === 'string' ? { name: policy } : policy;
  const s = profile ? { ...scenario, scheduling: profile.scheduling } : scenario;
  const run = simulate(s, spec, { seed: scenario.seed, sampleEveryS: Infinity });
  const endS = Math.max(run.simulatedS, scenario.durationS);
  let e2e = 0;
  let completed = 0;
  const ttft: number[] = [];
  for (const r of run.records) {
    const done = r.ok === true && r.finishS !== undefined;
    if (done) completed++;
    e2e += (done ? r.finishS! : endS) - r.arrivalS;
    ttft.push((done && r.firstTokenS !== undefined ? r.firstTokenS : endS) - r.arrivalS);
  }
  const n = Math.max(1, run.records.length);
  return {
    scenario: scenario.name,
    policy: profile?.label ?? policyLabel(spec),
    sent: run.records.length,
    completed,
    meanE2eS: e2e / n,
    ttftP90S: p90(ttft),
  };
}

/** A cell against its scenario's best baseline: ratios (1.05 = 5 % worse). */
export interface Judged extends MatrixCell {
  readonly e2eVsBest: number;
  readonly ttftVsBest: number;
  readonly e2eVsRoundRobin: number;
  readonly ttftVsRoundRobin: number;
}

const ratio = (a: number, b: number): number => (b > 0 ? a / b : a > 0 ? Infinity : 1);

/** Judge every cell against the baselines of its scenario (which must be among the cells). */
export function judge(cells: readonly MatrixCell[]): Judged[] {
  const by = new Map<string, Map<string, MatrixCell>>();
  for (const c of cells) {
    let m = by.get(c.scenario);
    if (!m) by.set(c.scenario, (m = new Map()));
    m.set(c.policy, c);
  }
  return cells.map((c) => {
    const m = by.get(c.scenario)!;
    const rr = m.get('round-robin');
    const bases = BASELINES.map((b) => m.get(b)).filter((x): x is MatrixCell => x !== undefined);
    if (!rr || bases.length === 0)
      throw new Error(`scenario '${c.scenario}': no round-robin cell to judge by`);
    const bestE2e = Math.min(...bases.map((b) => b.meanE2eS));
    const bestTtft = Math.min(...bases.map((b) => b.ttftP90S));
    return {
      ...c,
      e2eVsBest: ratio(c.meanE2eS, bestE2e),
      ttftVsBest: ratio(c.ttftP90S, bestTtft),
      e2eVsRoundRobin: ratio(c.meanE2eS, rr.meanE2eS),
      ttftVsRoundRobin: ratio(c.ttftP90S, rr.ttftP90S),
    };
  });
}

const pct = (r: number): string =>
  Number.isFinite(r) ? `${r >= 1 ? '+' : ''}${((r - 1) * 100).toFixed(1)}%` : 'inf';

/**
 * The table: one row per policy, per scenario two columns (mean E2E and TTFT p90, relative to
 * the scenario's best baseline), the baselines' own figures in seconds on top.
 */
export function matrixTable(judged: readonly Judged[]): string {
  const scenarios = [...new Set(judged.map((j) => j.scenario))];
  const policies = [...new Set(judged.map((j) => j.policy))];
  const cell = new Map(judged.map((j) => [`${j.scenario}\u0000${j.policy}`, j]));
  const header = ['policy', ...scenarios.flatMap((s) => [`${s} e2e`, 'ttft p90'])];
  const rows: string[][] = [];
  for (const b of BASELINES) {
    rows.push([
      `${b} (s)`,
      ...scenarios.flatMap((s) => {
        const c = cell.get(`${s}\u0000${b}`);
        return c ? [c.meanE2eS.toFixed(2), c.ttftP90S.toFixed(2)] : ['-', '-'];
      }),
    ]);
  }
  for (const p of policies) {
    rows.push([
      p,
      ...scenarios.flatMap((s) => {
        const c = cell.get(`${s}\u0000${p}`);
        if (!c) return ['-', '-'];
        const unfinished = c.completed < c.sent ? ` (${c.sent - c.completed} unfinished)` : '';
        return [pct(c.e2eVsBest) + unfinished, pct(c.ttftVsBest)];
      }),
    ]);
  }
  return formatTable(header, rows);
}

/** Policies whose mean E2E is worse than round robin's by more than `tolerance` somewhere. */
export function losers(
  judged: readonly Judged[],
  tolerance = 0.02,
): { policy: string; scenario: string; e2eVsRoundRobin: number }[] {
  return judged
    .filter((j) => j.e2eVsRoundRobin > 1 + tolerance)
    .map((j) => ({ policy: j.policy, scenario: j.scenario, e2eVsRoundRobin: j.e2eVsRoundRobin }));
}
