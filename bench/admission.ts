/**
 * `npm run bench:admission`: the admission API under a burst, memory store vs Redis, side by side.
 *
 * Each setup starts its replicas afresh for every round and fires 1000 concurrent /schedule
 * calls at them (pinned to a concurrency-bound, a requests/min-bound and a tokens/min-bound model,
 * or unpinned, in turn; see admission-run.ts), then reports what was admitted against each cap
 * and the /schedule latency seen by the clients. Setups: one replica on the memory store, one on
 * Redis, three on one Redis. A second phase runs a closed loop (64 clients, /schedule then
 * /complete, pinned to the concurrency-bound model, each lease held 5–15 ms) for a few seconds:
 * calls per second, and the most leases clients held at once (must stay within the cap).
 *
 * Clients and replicas share this process and the machine's cores: absolute figures move with
 * the host; the setups run in the same process one after another. Redis at REDIS_URL
 * (redis://127.0.0.1:6379/0); every key is deleted afterwards. JSON to bench-out/admission.json.
 * Knobs: BENCH_ROUNDS (5), BENCH_CALLS (1000), BENCH_LOOP_S (3).
 */
import { randomUUID } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { ascending, percentile } from '../src/report/stats.js';
import { RedisQuotaStore } from '../src/state/redis-quota-store.js';
import { CAPS, burst, dropPrefix, startReplicas, tally, type Call, type Replicas } from './admission-run.js';

const REDIS = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CALLS = Number(process.env.BENCH_CALLS ?? 1000);
const LOOP_S = Number(process.env.BENCH_LOOP_S ?? 3);

interface Setup {
  name: string;
  replicas: number;
  redis: boolean;
}
const SETUPS: Setup[] = [
  { name: 'memory ×1', replicas: 1, redis: false },
  { name: 'redis ×1', replicas: 1, redis: true },
  { name: 'redis ×3', replicas: 3, redis: true },
];

function conflicts(reps: Replicas): number {
  let n = 0;
  for (const r of reps.routers) {
    const s = r.admission.store;
    if (s instanceof RedisQuotaStore) n += s.conflicts;
  }
  return n;
}

async function withReplicas<T>(s: Setup, fn: (reps: Replicas) => Promise<T>): Promise<T> {
  const prefix = `llmlb:bench:${randomUUID()}:{q}:`;
  const reps = await startReplicas(s.replicas, s.redis ? { url: REDIS, prefix } : undefined);
  try {
    return await fn(reps);
  } finally {
    await reps.close();
    if (s.redis) await dropPrefix(REDIS, prefix);
  }
}

/**
 * Each client holds an admitted lease 5–15 ms (its "model call"). Clients see a lease from its
 * admission until they send /complete, a sub-interval of the
 * router's own count: the most they ever hold at once is a lower bound of the router's peak and
 * must stay within the cap too.
 */
async function closedLoop(
  urls: string[],
  seconds: number,
): Promise<{ ops: number; latencies: number[]; admitted: number; maxHeld: number }> {
  const dispatcher = new Agent({ connections: 64 });
  const end = performance.now() + seconds * 1000;
  const latencies: number[] = [];
  let ops = 0;
  let held = 0;
  let maxHeld = 0;
  let admitted = 0;
  const post = async (url: string, body: unknown): Promise<unknown> => {
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      dispatcher,
    });
    return res.body.json();
  };
  await Promise.all(
    Array.from({ length: 64 }, async (_, w) => {
      const url = urls[w % urls.length]!;
      while (performance.now() < end) {
        const t0 = performance.now();
        const r = (await post(`${url}/schedule`, { estimated_tokens: 10, model: 'conc' })) as {
          task_id?: string;
          wait_for_ms?: number;
        };
        latencies.push(performance.now() - t0);
        ops++;
        if (r.task_id) {
          admitted++;
          maxHeld = Math.max(maxHeld, ++held);
          await new Promise((res) => setTimeout(res, 5 + Math.random() * 10)); // "calls the model"
          held--;
          await post(`${url}/complete`, { task_id: r.task_id });
          ops++;
        } else await new Promise((res) => setTimeout(res, Math.min(r.wait_for_ms ?? 50, 50)));
      }
    }),
  );
  await dispatcher.close();
  return { ops, latencies, admitted, maxHeld };
}

const fmt = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '-');

async function main(): Promise<void> {
  console.log(
    `bench:admission — ${CALLS} concurrent /schedule calls × ${ROUNDS} rounds per setup; Redis ${REDIS}`,
  );
  console.log(
    `caps: ${Object.entries(CAPS)
      .map(
        ([m, c]) =>
          `${m} maxConcurrent=${c.maxConcurrent} rpm=${c.requestsPerMinute} tpm=${c.tokensPerMinute}`,
      )
      .join(' | ')}`,
  );
  const summary: Record<string, unknown>[] = [];
  for (const s of SETUPS) {
    const all: Call[] = [];
    const perRound: ReturnType<typeof tally>[] = [];
    let lost = 0;
    const wall: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      await withReplicas(s, async (reps) => {
        const t0 = performance.now();
        const calls = await burst(reps.urls, CALLS);
        wall.push(performance.now() - t0);
        all.push(...calls);
        perRound.push(tally(calls));
        lost += conflicts(reps);
      });
    }
    const loop = await withReplicas(s, (reps) => closedLoop(reps.urls, LOOP_S));
    const lat = all.map((c) => c.latencyMs);
    const violations = perRound.flatMap((t) => t.violations);
    if (loop.maxHeld > CAPS.conc!.maxConcurrent) {
      violations.push(
        `closed loop: clients held ${loop.maxHeld} conc leases at once > ${CAPS.conc!.maxConcurrent}`,
      );
    }
    const first = perRound[0]!;
    const row = {
      setup: s.name,
      rounds: ROUNDS,
      admittedPerRound: perRound.map((t) => t.admitted),
      waitedPerRound: perRound.map((t) => t.waited),
      perModel: first.models.map((m) => ({
        model: m.model,
        admitted: perRound.map((t) => t.models.find((x) => x.model === m.model)!.admitted),
        tokens: perRound.map((t) => t.models.find((x) => x.model === m.model)!.tokens),
        caps: {
          maxConcurrent: m.maxConcurrent,
          requestsPerMinute: m.requestsPerMinute,
          tokensPerMinute: m.tokensPerMinute,
        },
      })),
      violations,
      scheduleLatencyMs: {
        p50: percentile(ascending(lat), 0.5),
        p99: percentile(ascending(lat), 0.99),
        max: Math.max(...lat),
      },
      burstWallMs: { median: percentile(ascending(wall), 0.5) },
      lostRaces: lost,
      closedLoop: {
        seconds: LOOP_S,
        callsPerS: loop.ops / LOOP_S,
        admitted: loop.admitted,
        maxHeldByClients: loop.maxHeld,
        scheduleP50Ms: percentile(ascending(loop.latencies), 0.5),
        scheduleP99Ms: percentile(ascending(loop.latencies), 0.99),
      },
    };
    summary.push(row);
    console.log(`\n== ${s.name} ==`);
    for (const m of row.perModel) {
      const adm = m.admitted.join('/');
      const tok = m.tokens.join('/');
      console.log(
        `  ${m.model.padEnd(5)} admitted ${adm.padEnd(20)} tokens ${tok.padEnd(30)} caps conc=${m.caps.maxConcurrent} rpm=${m.caps.requestsPerMinute} tpm=${m.caps.tokensPerMinute}`,
      );
    }
    console.log(
      `  admitted/waited per round: ${row.admittedPerRound.join('/')} / ${row.waitedPerRound.join('/')}`,
    );
    console.log(`  cap violations: ${violations.length === 0 ? 'none' : violations.join('; ')}`);
    console.log(
      `  /schedule latency under the burst: p50 ${fmt(row.scheduleLatencyMs.p50)} ms, p99 ${fmt(row.scheduleLatencyMs.p99)} ms, max ${fmt(row.scheduleLatencyMs.max)} ms; burst wall ${fmt(row.burstWallMs.median)} ms; lost CAS races ${lost}`,
    );
    console.log(
      `  closed loop (64 clients, schedule+complete): ${row.closedLoop.callsPerS.toFixed(0)} calls/s, /schedule p50 ${fmt(row.closedLoop.scheduleP50Ms)} ms, p99 ${fmt(row.closedLoop.scheduleP99Ms)} ms; ${loop.admitted} admitted, at most ${loop.maxHeld} held at once (cap ${CAPS.conc!.maxConcurrent})`,
    );
  }
  console.log(
    '\n| setup | admitted / 1000 (per round) | cap violations | /schedule p50 ms | p99 ms | closed-loop calls/s |',
  );
  console.log('|---|---|---|---|---|---|');
  for (const r of summary as {
    setup: string;
    admittedPerRound: number[];
    violations: string[];
    scheduleLatencyMs: { p50: number; p99: number };
    closedLoop: { callsPerS: number };
  }[]) {
    console.log(
      `| ${r.setup} | ${r.admittedPerRound.join(', ')} | ${r.violations.length} | ${fmt(r.scheduleLatencyMs.p50)} | ${fmt(r.scheduleLatencyMs.p99)} | ${r.closedLoop.callsPerS.toFixed(0)} |`,
    );
  }
  await mkdir('bench-out', { recursive: true });
  await writeFile(
    'bench-out/admission.json',
    JSON.stringify({ calls: CALLS, rounds: ROUNDS, caps: CAPS, setups: summary }, null, 2),
  );
  if (summary.some((r) => (r as { violations: string[] }).violations.length > 0)) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
