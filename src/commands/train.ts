/**
 * `llmlb train --scenario FILE --episodes N --out policy.json`: trains the RL router's weights
 * (the loop is src/rl/train.ts) on the simulator, prints each episode's summary.
 */
import { train as trainRl, type EpisodeStats, type TrainOptions, type TrainResult } from '../rl/train.js';
import { simulateWith } from '../sim/simulator.js';

/** Train on the simulator (src/rl/train.ts `train` with src/sim's simulateWith). */
export function train(o: TrainOptions): Promise<TrainResult> {
  return trainRl(o, simulateWith);
}

/** CLI entry: prints one line per episode's summary at the end. */
export async function runTrainCommand(o: TrainOptions): Promise<void> {
  const line = (s: EpisodeStats): string =>
    `episode ${s.episode}: training mean E2E ${s.meanE2eS.toFixed(2)} s (${s.completed} done, ε ${s.epsilon.toFixed(2)}, reward ${s.totalReward.toFixed(1)}); frozen greedy ${s.evalMeanE2eS.toFixed(2)} s (${s.evalCompleted} done)\n`;
  const r = await train({
    ...o,
    progress: o.progress ?? process.stderr,
    onEpisode: (s) => process.stderr.write(`\n${line(s)}`),
  });
  for (const s of r.stats) process.stdout.write(line(s));
  process.stdout.write(
    `round robin on the evaluation workload: ${r.roundRobinEvalMeanE2eS.toFixed(2)} s; kept episode ${r.keptEpisode}\n`,
  );
  process.stdout.write(`wrote ${r.file} and ${r.svg}\n`);
}
