import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, basename } from 'node:path';
import type * as vl from 'vega-lite';
import { MixingParams, mixingTerms } from '../core/policies/scorers/mixing-impact-scorer.js';
import { rlPolicyFrom, stateSize, type RlPolicy, type RlWeights } from '../core/policies/rl.js';
import { WorkloadParams } from '../core/policies/workload-tracker.js';
import { createRng, deriveSeed } from '../core/rng.js';
import type { BackendView, CompletionReport, RequestInfo } from '../core/types.js';
import { renderSvg } from '../report/charts.js';
import { progressBar } from '../report/progress.js';
import { DoubleDqn } from '../rl/dqn.js';
import { loadScenario } from '../scenario/load.js';
import type { Scenario } from '../scenario/types.js';
import { simulateWith } from '../sim/simulator.js';
import type { ClientDriver, ScheduledRequest } from '../workloads/types.js';

export interface TrainOptions {
  readonly scenarioPath: string;
  readonly episodes: number;
  readonly seed?: number | undefined;
  /** Requests per episode (the scenario's first N; default: all). */
  readonly requests?: number | undefined;
  readonly out: string;
  /** Progress output (stderr in the CLI). */
  readonly progress?: { write(s: string): unknown } | undefined;
}

export interface EpisodeStats {
  readonly episode: number;
  readonly epsilon: number;
  readonly guidance: number;
  readonly totalReward: number;
  readonly meanE2eS: number;
  readonly completed: number;
  readonly decisions: number;
}

// Seed 004 C.10.3 / §5: γ, completion reward, β_d of the guidance decay; minibatch smaller than
// the seed's 512 so an episode's gradient steps fit the 10-minute budget on two cores.
const GAMMA = 0.95;
/** Rewards are divided by this so Q-values stay near unit scale (Huber's linear zone is ±1). */
const REWARD_SCALE = 10;
const COMPLETION_REWARD = 1;
const BETA_D = 0.5;
const HIDDEN = [64, 64];

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

/**
 * Train seed 004's workload-guided Double DQN on the simulator. Each time the scheduler asks the
 * policy about the head request is one MDP step; the reward for a step (Eq. 3) is
 *   + r_w per request completed in the step
 *   − Δt · Σ_j (1 − f_j) / T̂_j over requests in flight and the head (latency still owed)
 *   + g_k · h,  h = r_mixing(chosen) − max_l r_mixing(l) ≤ 0  (Eq. 4, over the candidates' spread; 0 for "wait")
 * with the guidance weight g_k = γ·e^{−β_d k} decaying per episode and the training discount
 * γ̃_k = (1 − e^{−β_d k})·γ (seed §5). The seed prints the guidance term as −(γ − γ̃_k)·h; with h ≤ 0
 * that would reward the worse backend, so it is applied as a penalty here (HuRL's form).
 */
export async function train(o: TrainOptions): Promise<{ stats: EpisodeStats[]; file: string; svg: string }> {
  const base: Scenario = loadScenario(o.scenarioPath);
  const seed = o.seed ?? base.seed;
  const n = o.requests;
  const scenario: Scenario =
    n === undefined ? base : { ...base, createDriver: (s) => limited(base.createDriver(s), n) };
  const m = scenario.fleet.length;
  const wp = WorkloadParams.parse({});
  const mix = MixingParams.parse({});
  const nb = wp.bucketEdges.length + 1;
  const meta: RlWeights = {
    kind: 'llmlb-rl',
    backends: m,
    bucketEdges: wp.bucketEdges,
    kvCapacityTokens: Math.min(...scenario.fleet.map((b) => b.profile.kvCapacityTokens)),
    net: undefined,
  };
  const rand = createRng(deriveSeed(seed, 'rl-train'));
  const dqn = new DoubleDqn(
    { sizes: [stateSize(m, nb), ...HIDDEN, m + 1], lr: 1e-3, batch: 64, bufferSize: 20000, targetEvery: 200 },
    rand,
  );
  const stats: EpisodeStats[] = [];
  // The weights written: those after the best greedy-phase episode (DQN's return is noisy from one
  // episode to the next); before any greedy episode, the latest.
  let kept: { e2e: number; json: ReturnType<DoubleDqn['toJSON']>; episode: number } | undefined;
  const bar = o.progress ? progressBar('train', o.progress) : undefined;
  const { kvCapacityTokens: _kv, bucketEdges: _be, ...tracked } = wp;

  for (let k = 0; k < o.episodes; k++) {
    // Explore fully at first, greedily over the last fifth (the seed stops exploring at episode 20 of 25).
    const epsilon = Math.max(0, 1 - k / Math.max(1, 0.8 * o.episodes - 1)) * 0.9 + 0.02;
    const guidance = GAMMA * Math.exp(-BETA_D * k);
    const discount = (1 - Math.exp(-BETA_D * k)) * GAMMA;
    let prev: { s: Float64Array; a: number; h: number; at: number; owed: number } | undefined;
    let completed = 0;
    let totalReward = 0;
    let decisions = 0;
    const owed = (now: number, head: RequestInfo | undefined): number => {
      // Σ (1 − f_j)/T̂_j: each open request's share still to produce over its ideal time.
      const t = policy.tracker;
      let s = 0;
      for (let slot = 0; slot < m; slot++) {
        const name = policy.slotName(slot);
        if (name === undefined) continue;
        const pf = t.prefillS(name);
        const dc = t.decodeS(name);
        for (const f of t.work(name).flights.values()) {
          const ideal = f.promptTokens * pf + Math.max(1, f.expectedOut) * dc;
          s += (1 - t.producedBy(f, name, now) / Math.max(1, f.expectedOut)) / ideal;
        }
      }
      if (head) {
        const p = t.predict(head);
        s += 1 / (p.promptTokens * wp.priorPrefillS + Math.max(1, p.expectedOut) * wp.priorDecodeS);
      }
      return s;
    };
    const close = (s2: Float64Array | undefined, now: number): void => {
      if (!prev) return;
      const r =
        (COMPLETION_REWARD * completed - ((now - prev.at) / 1000) * prev.owed) / REWARD_SCALE +
        guidance * prev.h;
      completed = 0;
      totalReward += r;
      dqn.buffer.push({ s: prev.s, a: prev.a, r, s2, gamma: discount });
      prev = undefined;
    };
    let candidatesNow: readonly BackendView[] = [];
    let reqNow: RequestInfo | undefined;
    let nowMs = 0;
    const policy: RlPolicy = rlPolicyFrom(meta, dqn.online, tracked, {
      act(state, allowed) {
        const s = Float64Array.from(state);
        close(s, nowMs);
        const a = dqn.act(s, epsilon, allowed);
        let h = 0;
        if (a < m && reqNow) {
          const t = policy.tracker;
          const p = t.predict(reqNow);
          const r = (name: string): number =>
            mixingTerms(p.promptTokens, p.expectedOut, t.contextTokens(name, nowMs), mix).r;
          let best = -Infinity;
          let worst = Infinity;
          let chosen = 0;
          for (const c of candidatesNow) {
            if (c.index >= m) continue;
            const v = r(c.name);
            if (v > best) best = v;
            if (v < worst) worst = v;
            if (c.index === a) chosen = v;
          }
          // Scaled by the candidates' spread (as the mixing scorer scales), so h ∈ [−1, 0]: the
          // raw Eq. 1–2 differences are hundredths, too small beside the other terms to guide.
          h = best > worst ? (chosen - best) / (best - worst) : 0;
        }
        prev = { s, a, h, at: nowMs, owed: owed(nowMs, reqNow) };
        decisions++;
        dqn.learn();
        return a;
      },
    });
    const inner = policy;
    const wrapped = {
      ...inner,
      pick(req: RequestInfo, candidates: readonly BackendView[], now: number) {
        reqNow = req;
        candidatesNow = candidates;
        nowMs = now;
        return inner.pick(req, candidates, now);
      },
      onComplete(req: RequestInfo, b: BackendView, rep: CompletionReport, now: number) {
        if (rep.ok) completed++;
        inner.onComplete!(req, b, rep, now);
      },
    };
    const run = simulateWith(scenario, wrapped, 'rl', {
      seed: seed + k,
      probeEveryS: Infinity,
      sampleEveryS: Infinity,
    });
    close(undefined, run.simulatedS * 1000);
    const e2e = run.records
      .filter((r) => r.ok === true && r.finishS !== undefined)
      .map((r) => r.finishS! - r.arrivalS);
    stats.push({
      episode: k + 1,
      epsilon,
      guidance,
      totalReward,
      meanE2eS: mean(e2e),
      completed: e2e.length,
      decisions,
    });
    const greedy = epsilon <= 0.05;
    const e2eMean = stats[stats.length - 1]!.meanE2eS;
    if (!greedy) kept = { e2e: e2eMean, json: dqn.toJSON(), episode: -1 };
    else if (!kept || kept.episode < 0 || e2eMean < kept.e2e)
      kept = { e2e: e2eMean, json: dqn.toJSON(), episode: k + 1 };
    bar?.update(k + 1, o.episodes);
  }
  bar?.stop();

  mkdirSync(dirname(o.out) || '.', { recursive: true });
  const doc = {
    ...meta,
    net: kept?.json ?? dqn.toJSON(),
    training: {
      scenario: scenario.name,
      episodes: o.episodes,
      seed,
      requestsPerEpisode: n ?? null,
      keptEpisode: kept && kept.episode > 0 ? kept.episode : o.episodes,
      curve: stats,
    },
  };
  writeFileSync(o.out, JSON.stringify(doc) + '\n');
  const svg = join(dirname(o.out), `${basename(o.out).replace(/\.json$/, '')}-curve.svg`);
  writeFileSync(svg, await renderSvg(curveSpec(scenario.name, stats)));
  return { stats, file: o.out, svg };
}

function curveSpec(name: string, stats: readonly EpisodeStats[]): vl.TopLevelSpec {
  const data = stats.flatMap((s) => [
    { episode: s.episode, value: s.meanE2eS, metric: 'mean E2E (s)' },
    { episode: s.episode, value: s.totalReward / Math.max(1, s.decisions), metric: 'reward per decision' },
  ]);
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: `${name}: RL router learning curve`,
    data: { values: data },
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'episode', type: 'quantitative', title: 'episode' },
      y: { field: 'value', type: 'quantitative', title: '' },
      color: { field: 'metric', type: 'nominal' },
      row: { field: 'metric', type: 'nominal' },
    },
    resolve: { scale: { y: 'independent' } },
  } as vl.TopLevelSpec;
}

/** CLI entry: prints one line per episode's summary at the end. */
export async function runTrainCommand(o: TrainOptions): Promise<void> {
  const { stats, file, svg } = await train({ ...o, progress: o.progress ?? process.stderr });
  for (const s of stats)
    process.stdout.write(
      `episode ${s.episode}: mean E2E ${s.meanE2eS.toFixed(2)} s, reward ${s.totalReward.toFixed(1)}, ε ${s.epsilon.toFixed(2)}, completed ${s.completed}\n`,
    );
  process.stdout.write(`wrote ${file} and ${svg}\n`);
}
