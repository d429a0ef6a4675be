/**
 * `npm run bench:backlog` (issue 7, the quota-aware router): drain a backlog of prompts across 10 models with
 * per-model targets, the as-is pipeline (20 workers × batches of 10, 30-minute worker timeout)
 * against llmlb (solver + admission API), first on virtual time, then live and time-scaled.
 *
 * Env: BACKLOG_TASKS (2000), BACKLOG_LIVE_TASKS (same), BACKLOG_TIME_SCALE (5 = 1 s → 200 ms),
 * BACKLOG_LIVE=0 to simulate only, BACKLOG_OUT (bench-out/backlog).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatTable } from '../src/report/table.js';
import { table, type Row } from './backlog-table.js';
import { BACKLOG_MODELS, backlogPrompts } from '../src/sim/backlog/scenario.js';
import { simulateAsIs, simulateLlmlb, type PipelineResult } from '../src/sim/backlog/simulate.js';

const N = Number(process.env.BACKLOG_TASKS ?? 2000);
const OUT = process.env.BACKLOG_OUT ?? 'bench-out/backlog';

const strip = (r: PipelineResult): Row => ({
  name: r.name,
  drainS: r.drainS,
  solved: r.solved,
  calls: r.calls,
  wastedCalls: r.wastedCalls,
  peakWorkers: r.peakWorkers,
  violations: r.violations,
});

const goals = (asIs: Row, llmlb: Row): string =>
  `goals: llmlb 0 violations → ${llmlb.violations.total === 0 ? 'met' : 'NOT met'}; ` +
  `drain ≥ 2× faster → ${asIs.drainS / llmlb.drainS >= 2 ? 'met' : 'NOT met'} (${(asIs.drainS / llmlb.drainS).toFixed(2)}×)\n`;

mkdirSync(OUT, { recursive: true });
const prompts = backlogPrompts(N);
process.stdout.write(
  `backlog: ${N} tasks, 10 models (latency 1 s–2 min per prompt), targets per model:\n` +
    formatTable(
      ['model', 'latency s', 'maxConcurrent', 'req/min', 'tokens/min'],
      BACKLOG_MODELS.map((m) => [
        m.name,
        `${m.minS}–${m.maxS}`,
        String(m.limits.maxConcurrent),
        String(m.limits.requestsPerMinute),
        String(m.limits.tokensPerMinute),
      ]),
    ) +
    '\n\n',
);
const simAsIs = strip(simulateAsIs(BACKLOG_MODELS, prompts));
const simLlmlb = strip(simulateLlmlb(BACKLOG_MODELS, prompts));
process.stdout.write(
  table('simulated (virtual time, pure quota core)', simAsIs, simLlmlb) + goals(simAsIs, simLlmlb) + '\n',
);
// A backlog large enough for the 30-minute worker timeout to bite (each worker's share > 30 min).
const BIG = Number(process.env.BACKLOG_BIG_TASKS ?? 5000);
const bigPrompts = backlogPrompts(BIG);
const bigAsIs = strip(simulateAsIs(BACKLOG_MODELS, bigPrompts));
const bigLlmlb = strip(simulateLlmlb(BACKLOG_MODELS, bigPrompts));
process.stdout.write(
  table(`simulated, ${BIG} tasks (as-is workers hit the 30-minute timeout)`, bigAsIs, bigLlmlb) +
    goals(bigAsIs, bigLlmlb) +
    '\n',
);
const results: Record<string, unknown> = {
  tasks: N,
  simulated: { asIs: simAsIs, llmlb: simLlmlb },
  simulatedBig: { tasks: BIG, asIs: bigAsIs, llmlb: bigLlmlb },
};

if (process.env.BACKLOG_LIVE !== '0') {
  const { runLive } = await import('./backlog-live.js');
  const live = await runLive(
    process.env.BACKLOG_LIVE_TASKS ? backlogPrompts(Number(process.env.BACKLOG_LIVE_TASKS)) : prompts,
  );
  process.stdout.write(live.text);
  results.live = live.results;
}
writeFileSync(join(OUT, 'results.json'), JSON.stringify(results, null, 2) + '\n');
process.stdout.write(`written ${join(OUT, 'results.json')}\n`);
