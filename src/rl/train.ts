/**
 * The RL router's training loop (`llmlb train`): the performance-aware router's workload-guided
 * Double DQN trained on the simulator, episode by episode, with a frozen greedy evaluation on a
 * held-out workload after each; writes the weights (src/rl/weights-file.ts reads them) and a
 * learning-curve SVG. The simulator is passed in (`Simulate`, src/sim/simulator.ts simulateWith):
 * src/rl sits in the layer above the hosts and never imports them.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, basename } from 'node:path';
import type * as vl from 'vega-lite';
import type { z } from 'zod';
import { MixingParams, mixingTerms } from '../core/policies/plugins/scorers/mixing-impact-scorer.js';
import { MlpNet } from '../core/estimators/mlp.js';
import { createPolicy } from '../core/policies/index.js';
import {
  rlPolicyFrom,
  sharedRowSize,
  type RlPolicy,
  type RlRedecide,
  type RlWeights,
} from '../core/policies/builtin/rl.js';
import {
  WorkloadParams,
  type WorkloadConfig,
  type WorkloadTracker,
} from '../core/policies/shared/workload-tracker.js';
import { createRng, deriveSeed } from '../core/rng.js';
import type { BackendView, CompletionReport, Policy, RequestInfo } from '../core/types.js';
import { renderSvg } from '../report/charts.js';
import { progressBar } from '../report/progress.js';
import { SharedHeadDqn } from './dqn.js';
import { loadScenario } from '../scenario/load.js';
import type { Scenario } from '../scenario/types.js';
import type { ClientDriver, ScheduledRequest } from '../workloads/types.js';

/** What training reads of a simulated run (src/sim/simulator.ts RunResult). */
export interface EpisodeRun {
  /** In arrival order. */
  readonly records: readonly {
    readonly ok: boolean | undefined;
    readonly finishS: number | undefined;
    readonly arrivalS: number;
  }[];
  /** Virtual seconds the run covered. */
  readonly simulatedS: number;
}

/** The simulator, as training calls it (src/sim/simulator.ts simulateWith). */
export type Simulate = (
  scenario: Scenario,
  policy: Policy,
  label: string,
  opts: { readonly seed: number; readonly probeEveryS: number; readonly sampleEveryS: number },
) => EpisodeRun;

export interface TrainOptions {
  readonly scenarioPath: string;
  readonly episodes: number;
  readonly seed?: number | undefined;
  /** Requests per episode (the scenario's first N; default: all). */
  readonly requests?: number | undefined;
  readonly out: string;
  /** Progress output (stderr in the CLI). */
  readonly progress?: { write(s: string): unknown } | undefined;
  /** When held requests are decided again, in training and in the written weights (default 'when-fits'). */
  readonly redecide?: RlRedecide | undefined;
  /** Called as each episode (and its frozen evaluation) ends. */
  readonly onEpisode?: ((s: EpisodeStats) => void) | undefined;
}

export interface TrainResult {
  readonly stats: EpisodeStats[];
  readonly file: string;
  readonly svg: string;
  readonly keptEpisode: number;
  /** Round robin on the evaluation workload (the figure the frozen evaluations compare with). */
  readonly roundRobinEvalMeanE2eS: number;
}

export interface EpisodeStats {
  readonly episode: number;
  readonly epsilon: number;
  readonly guidance: number;
  readonly totalReward: number;
  /** Mean E2E of the training episode (learning and exploring while it routes). */
  readonly meanE2eS: number;
  readonly completed: number;
  readonly decisions: number;
  /** Decisions learned from (repeated "wait"s at one instant count once). */
  readonly recorded: number;
  /** Frozen greedy evaluation after the episode, on the held-out evaluation workload. */
  readonly evalMeanE2eS: number;
  readonly evalCompleted: number;
}

// The performance-aware router C.10.3 / §5: γ, completion reward, β_d of the guidance decay; minibatch smaller than
// the seed's 512 so an episode's gradient steps fit the 10-minute budget on two cores.
const GAMMA = 0.95;
/** Rewards are divided by this so Q-values stay near unit scale (Huber's linear zone is ±1). */
const REWARD_SCALE = 10;
const COMPLETION_REWARD = 1;
const BETA_D = 0.5;
/**
 * Seconds one MDP step stands for in the latency term (seed §4.3: a transition every Δt, the mean
 * time of a decode token; §5: 0.02 s). Charging the time actually elapsed until the next decision
 * instead would make "wait" look costly: after a hold, nothing is decided until the next arrival
 * or completion, while a dispatch is often followed at once by the next request's decision.
 */
const STEP_S = 0.02;
/** The shared head's hidden layers: small, as it runs once per candidate per decision. */
const HIDDEN = [16, 16];
/** Workload seed offset of the frozen evaluation episodes (never trained on). */
const EVAL_SEED_OFFSET = 1000;

/** The scenario's first `n` opening requests only (open-loop workloads send nothing more). */
function limited(driver: ClientDriver, n: number): ClientDriver {
  return {
    start: () => driver.start().slice(0, n),
    onFinish: (id, now, ok, text) => driver.onFinish(id, now, ok, text),
    ...(driver.stream
      ? {
          stream: (): Iterator<ScheduledRequest> => {
            const it = driver.stream!();
            let i = 0;
            return {
              next: () => (i++ < n ? it.next() : { done: true, value: undefined }),
            };
          },
        }
      : {}),
  };
}

const mean = (xs: readonly number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

function e2eOf(run: EpisodeRun): number[] {
  return run.records
    .filter((r) => r.ok === true && r.finishS !== undefined)
    .map((r) => r.finishS! - r.arrivalS);
}

/** Mean E2E for ranking: unfinished requests count as their whole run, so dropping work never wins. */
function score(run: EpisodeRun, total: number): number {
  const done = e2eOf(run);
  const left = Math.max(0, total - done.length);
  return (done.reduce((a, b) => a + b, 0) + left * run.simulatedS) / Math.max(1, total);
}

/** What the weights file says besides the net: the fleet and workload the net was shaped for. */
function weightsMeta(scenario: Scenario, wp: WorkloadConfig, redecide: RlRedecide): RlWeights {
  return {
    kind: 'llmlb-rl',
    arch: 'shared-head',
    backends: scenario.fleet.length,
    bucketEdges: wp.bucketEdges,
    kvCapacityTokens: Math.min(...scenario.fleet.map((b) => b.profile.kvCapacityTokens)),
    redecide,
    net: undefined,
  };
}

/** Σ (1 − f_j)/T̂_j: each open request's share still to produce over its ideal time (the head's whole). */
function owedLatency(
  t: WorkloadTracker,
  fleet: Iterable<string>,
  now: number,
  head: RequestInfo | undefined,
  wp: WorkloadConfig,
): number {
  let s = 0;
  for (const c of fleet) {
    const pf = t.prefillS(c);
    const dc = t.decodeS(c);
    for (const f of t.work(c).flights.values()) {
      const ideal = f.promptTokens * pf + Math.max(1, f.expectedOut) * dc;
      s += (1 - t.producedBy(f, c, now) / Math.max(1, f.expectedOut)) / ideal;
    }
  }
  if (head) {
    const p = t.predict(head);
    s += 1 / (p.promptTokens * wp.priorPrefillS + Math.max(1, p.expectedOut) * wp.priorDecodeS);
  }
  return s;
}

/**
 * Eq. 4 over the options, scaled by the candidates' spread (as the mixing scorer scales), so
 * h ∈ [−1, 0]: the raw Eq. 1–2 differences are hundredths, too small beside the other terms.
 */
function guideTerm(
  t: WorkloadTracker,
  req: RequestInfo | undefined,
  candidates: readonly BackendView[],
  now: number,
  a: number,
  waitOk: boolean,
  mix: z.output<typeof MixingParams>,
): number {
  if (!req) return 0;
  const p = t.predict(req);
  const need = p.promptTokens + p.expectedOut;
  if (a >= candidates.length) return 0; // "wait": offered only when nothing fits
  if (!t.fits(candidates[a]!.name, need, now)) {
    const other = waitOk || candidates.some((c) => t.fits(c.name, need, now));
    return other ? -1 : 0;
  }
  let best = -Infinity;
  let worst = Infinity;
  let chosen = 0;
  candidates.forEach((c, i) => {
    if (!t.fits(c.name, need, now)) return;
    const v = mixingTerms(p.promptTokens, p.expectedOut, t.contextTokens(c.name, now), mix).r;
    if (v > best) best = v;
    if (v < worst) worst = v;
    if (i === a) chosen = v;
  });
  return best > worst ? (chosen - best) / (best - worst) : 0;
}

/**
 * Train the performance-aware router's workload-guided Double DQN on the simulator. Each time the scheduler asks the
 * policy about a waiting request is one MDP step; the reward for a step (Eq. 3) is
 *   + r_w per request completed in the step
 *   − Δt · Σ_j (1 − f_j) / T̂_j over requests in flight and the head (latency still owed; Δt = STEP_S)
 *   + g_k · h  (Eq. 4: h = r_mixing(chosen) − max over the options, scaled to [−1, 0])
 * with the guidance weight g_k = γ·e^{−β_d k} decaying per episode and the training discount
 * γ̃_k = (1 − e^{−β_d k})·γ (seed §5). The seed prints the guidance term as −(γ − γ̃_k)·h; with h ≤ 0
 * that would reward the worse backend, so it is applied as a penalty here (HuRL's form). An option
 * where the request does not fit in KV while another option (a backend it fits, or "wait") exists
 * has h = −1: the seed's penalty also "prevents requests from being queued at each model instance
 * due to a lack of memory" (§4.3).
 *
 * The Q-function is one shared head over option rows (src/core/policies/builtin/rl.ts). After every
 * training episode the network is frozen and run greedily on a held-out workload seed; the
 * weights written are those with the best such evaluation (training episodes' own figures are
 * not used to select: they route while learning and exploring).
 */
export async function train(o: TrainOptions, simulateWith: Simulate): Promise<TrainResult> {
  const base: Scenario = loadScenario(o.scenarioPath);
  const seed = o.seed ?? base.seed;
  const n = o.requests;
  const scenario: Scenario =
    n === undefined ? base : { ...base, createDriver: (s) => limited(base.createDriver(s), n) };
  const wp = WorkloadParams.parse({});
  const mix = MixingParams.parse({});
  const nb = wp.bucketEdges.length + 1;
  const F = sharedRowSize(nb);
  const meta = weightsMeta(scenario, wp, o.redecide ?? 'when-fits');
  const rand = createRng(deriveSeed(seed, 'rl-train'));
  const dqn = new SharedHeadDqn(
    { sizes: [F, ...HIDDEN, 1], lr: 1e-3, batch: 64, bufferSize: 30000, targetEvery: 250 },
    rand,
  );
  const stats: EpisodeStats[] = [];
  let kept: { score: number; json: ReturnType<SharedHeadDqn['toJSON']>; episode: number } | undefined;
  const bar = o.progress ? progressBar('train', o.progress) : undefined;
  const { kvCapacityTokens: _kv, bucketEdges: _be, ...tracked } = wp;
  const simOpts = (s: number) => ({ seed: s, probeEveryS: Infinity, sampleEveryS: Infinity });
  // Round robin on the evaluation workload: the reference the frozen evaluations are shown against.
  const evalSeed = seed + EVAL_SEED_OFFSET;
  const rrRun = simulateWith(
    scenario,
    createPolicy('round-robin', createRng(1)),
    'round-robin',
    simOpts(evalSeed),
  );
  const total = rrRun.records.length;
  const rrEval = score(rrRun, total);

  for (let k = 0; k < o.episodes; k++) {
    // Exploration falls linearly to 2 % by the last episode; the guidance (not random actions)
    // steers the early episodes.
    const epsilon = 0.02 + 0.28 * Math.max(0, 1 - k / Math.max(1, o.episodes - 1));
    const guidance = GAMMA * Math.exp(-BETA_D * k);
    const discount = (1 - Math.exp(-BETA_D * k)) * GAMMA;
    let prev: { s: Float64Array; a: number; h: number; owed: number } | undefined;
    let completed = 0;
    let totalReward = 0;
    let decisions = 0;
    let recorded = 0;
    let lastWaitAt = -1;
    const fleet = new Set<string>();
    const close = (s2: Float64Array | undefined): void => {
      if (!prev) return;
      const r = (COMPLETION_REWARD * completed - STEP_S * prev.owed) / REWARD_SCALE + guidance * prev.h;
      completed = 0;
      totalReward += r;
      dqn.buffer.push({ s: prev.s, a: prev.a, r, s2, gamma: discount });
      prev = undefined;
    };
    let candidatesNow: readonly BackendView[] = [];
    let reqNow: RequestInfo | undefined;
    let nowMs = 0;
    const policy: RlPolicy = rlPolicyFrom(meta, dqn.online, tracked, {
      act(rows, count, waitOk) {
        decisions++;
        const a = dqn.act(rows.subarray(0, count * F), epsilon);
        // Every pump re-asks each held request: repeated "wait"s at one instant are one decision
        // for learning (else they flood the replay buffer and the gradient steps).
        const wait = waitOk && a === count - 1;
        if (wait && lastWaitAt === nowMs) return a;
        if (wait) lastWaitAt = nowMs;
        const s = rows.slice(0, count * F);
        close(s);
        prev = {
          s,
          a,
          h: guideTerm(policy.tracker, reqNow, candidatesNow, nowMs, a, waitOk, mix),
          owed: owedLatency(policy.tracker, fleet, nowMs, reqNow, wp),
        };
        recorded++;
        dqn.learn();
        return a;
      },
    });
    const wrapped: Policy = {
      ...policy,
      pick(req: RequestInfo, candidates: readonly BackendView[], now: number) {
        reqNow = req;
        candidatesNow = candidates;
        nowMs = now;
        for (const c of candidates) fleet.add(c.name);
        return policy.pick(req, candidates, now);
      },
      onComplete(req: RequestInfo, b: BackendView, rep: CompletionReport, now: number) {
        if (rep.ok) completed++;
        policy.onComplete!(req, b, rep, now);
      },
    };
    // Training workloads: seeds after the scenario's own (which `llmlb simulate` reports on).
    const run = simulateWith(scenario, wrapped, 'rl', simOpts(seed + 1 + k));
    close(undefined);
    const e2e = e2eOf(run);
    // Freeze and evaluate: greedy, no learning, on the held-out workload.
    const frozen = MlpNet.fromJSON(dqn.toJSON());
    const evalRun = simulateWith(scenario, rlPolicyFrom(meta, frozen, tracked), 'rl', simOpts(evalSeed));
    const evalScore = score(evalRun, total);
    stats.push({
      episode: k + 1,
      epsilon,
      guidance,
      totalReward,
      meanE2eS: mean(e2e),
      completed: e2e.length,
      decisions,
      recorded,
      evalMeanE2eS: evalScore,
      evalCompleted: e2eOf(evalRun).length,
    });
    o.onEpisode?.(stats[stats.length - 1]!);
    if (!kept || evalScore < kept.score) kept = { score: evalScore, json: frozen.toJSON(), episode: k + 1 };
    bar?.update(k + 1, o.episodes);
  }
  bar?.stop();

  const keptEpisode = kept?.episode ?? o.episodes;
  const training = {
    scenario: scenario.name,
    episodes: o.episodes,
    seed,
    trainSeeds: `${seed + 1}..${seed + o.episodes}`,
    evalSeed,
    requestsPerEpisode: n ?? null,
    keptEpisode,
    roundRobinEvalMeanE2eS: rrEval,
    curve: stats,
  };
  const svg = await writeWeights(o.out, { ...meta, net: kept?.json ?? dqn.toJSON(), training }, stats);
  return { stats, file: o.out, svg, keptEpisode, roundRobinEvalMeanE2eS: rrEval };
}

/** The weights file (what src/rl/weights-file.ts reads, with how it was trained) and its learning-curve SVG beside it. */
async function writeWeights(
  out: string,
  doc: RlWeights & {
    readonly training: { readonly scenario: string; readonly roundRobinEvalMeanE2eS: number };
  },
  stats: readonly EpisodeStats[],
): Promise<string> {
  mkdirSync(dirname(out) || '.', { recursive: true });
  writeFileSync(out, JSON.stringify(doc) + '\n');
  const svg = join(dirname(out), `${basename(out).replace(/\.json$/, '')}-curve.svg`);
  writeFileSync(
    svg,
    await renderSvg(curveSpec(doc.training.scenario, stats, doc.training.roundRobinEvalMeanE2eS)),
  );
  return svg;
}

function curveSpec(name: string, stats: readonly EpisodeStats[], rrEval: number): vl.TopLevelSpec {
  const data = stats.flatMap((s) => [
    { episode: s.episode, value: s.meanE2eS, metric: 'mean E2E (s)', series: 'training episode' },
    { episode: s.episode, value: s.evalMeanE2eS, metric: 'mean E2E (s)', series: 'frozen greedy (held-out)' },
    { episode: s.episode, value: rrEval, metric: 'mean E2E (s)', series: 'round robin (held-out)' },
    {
      episode: s.episode,
      value: s.totalReward / Math.max(1, s.recorded),
      metric: 'reward per decision',
      series: 'training episode',
    },
  ]);
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: `${name}: RL router learning curve`,
    data: { values: data },
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'episode', type: 'quantitative', title: 'episode' },
      y: { field: 'value', type: 'quantitative', title: '' },
      color: { field: 'series', type: 'nominal' },
      row: { field: 'metric', type: 'nominal' },
    },
    resolve: { scale: { y: 'independent' } },
  } as vl.TopLevelSpec;
}
