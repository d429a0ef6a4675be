/**
 * Synthetic traces in the public formats' exact shapes, for tests, `npm run bench:sim` and the
 * public-trace section of docs/results.md. We have no network here: these are generated, with the
 * published traces' shape (arrival burstiness, length distributions, multi-turn prefix reuse), not
 * copies of them.
 */
import { createRng } from '../core/rng.js';

function lognormal(rng: () => number, mean: number, sigma: number): number {
  // mean of exp(N(mu, sigma)) is exp(mu + sigma²/2)
  const mu = Math.log(mean) - (sigma * sigma) / 2;
  const z = Math.sqrt(-2 * Math.log(1 - rng())) * Math.cos(2 * Math.PI * rng());
  return Math.exp(mu + sigma * z);
}

/**
 * Mooncake conversation-trace shape: `requests` over `durationS`, turns of ongoing conversations
 * (probability `followUp`) resend their history's blocks plus new ones; mean input ~`meanInput`.
 */
export function mooncakeSample(opts: {
  requests: number;
  durationS: number;
  seed: number;
  followUp?: number;
  meanInput?: number;
  meanOutput?: number;
}): string {
  const rng = createRng(opts.seed);
  const follow = opts.followUp ?? 0.6;
  const meanInput = opts.meanInput ?? 2000;
  const meanOutput = opts.meanOutput ?? 200;
  const rate = opts.requests / opts.durationS;
  const convs: number[][] = [];
  let next = 0;
  let t = 0;
  const lines: string[] = [];
  for (let i = 0; i < opts.requests; i++) {
    t += -Math.log(1 - rng()) / rate;
    let ids: number[];
    if (convs.length > 0 && rng() < follow) {
      ids = convs[Math.floor(rng() * Math.min(convs.length, 64)) + Math.max(0, convs.length - 64)]!;
    } else {
      ids = [];
      convs.push(ids);
      // A shared system prompt for some applications: 1-2 blocks from a small pool.
      if (rng() < 0.5) ids.push(1_000_000 + Math.floor(rng() * 8));
    }
    const grow = Math.max(1, Math.round(lognormal(rng, meanInput / 512 / (follow > 0 ? 2 : 1), 0.8)));
    for (let k = 0; k < grow; k++) ids.push(next++);
    const input = Math.max(1, (ids.length - 1) * 512 + 1 + Math.floor(rng() * 511));
    const output = Math.max(1, Math.round(lognormal(rng, meanOutput, 1)));
    lines.push(
      JSON.stringify({
        timestamp: Math.round(t * 1000),
        input_length: input,
        output_length: output,
        hash_ids: [...ids],
      }),
    );
    // Long conversations end.
    if (ids.length > 40) convs.splice(convs.indexOf(ids), 1);
  }
  return lines.join('\n') + '\n';
}
