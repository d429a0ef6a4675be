/**
 * How fast a slot freed at one router reaches a request waiting for it at another (issue #31):
 * two SharedViews on one Redis, one backend of cap 2. Router A holds both slots; router B waits
 * for one (demand 1, sharedState's ask). A's request ends (A's round, as the router runs one when
 * a request ends): the time until B may dispatch there, with the hand-over (the book gives the
 * slot to B and tells it) and without (A gives it back; B's own round, polled every 5 ms while its
 * ask is unmet, takes it). Blocks of trials alternate between the two, in one run.
 * `npx tsx bench/handover.ts` — HANDOVER_TRIALS (per mode, 200), HANDOVER_REDIS.
 */
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { SharedView, redisViewTransport, type SharedViewTransport } from '../src/state/shared-view.js';

const TRIALS = Number(process.env.HANDOVER_TRIALS ?? 200);
const REDIS = process.env.HANDOVER_REDIS ?? 'redis://127.0.0.1:6379/0';
const BLOCK = 10;

async function trials(handover: boolean, n: number, out: number[]): Promise<number> {
  const prefix = `bench-handover-${process.pid}-${Date.now()}-${handover ? 'h' : 'r'}`;
  const conns = [0, 1, 2, 3].map(() => new Redis(REDIS));
  const s = { aIn: 2, bIn: 0, bDemand: 0 };
  let bCap = 0;
  let freedAt = 0;
  let got: (() => void) | undefined;
  const view = (id: string, t: SharedViewTransport, host: 'a' | 'b'): SharedView =>
    new SharedView(
      t,
      {
        backends: () => [{ name: 'x', inFlight: host === 'a' ? s.aIn : s.bIn, cap: 2 }],
        queued: () => 0,
        applyCaps: (c) => {
          if (host !== 'b' || !c.has('x')) return;
          bCap = c.get('x')!;
          if (bCap > s.bIn && got) got();
        },
        demand: () => (host === 'a' ? 0 : s.bDemand),
      },
      { routerId: id, intervalMs: 20, prefix, ttlMs: 1500 },
    );
  const tb = redisViewTransport(conns[2]!, prefix, conns[3]!);
  const a = view('A', redisViewTransport(conns[0]!, prefix, conns[1]!), 'a');
  const b = view('B', handover ? tb : { round: (...x) => tb.round(...x) }, 'b');
  a.start();
  b.start();
  await sleep(100);
  try {
    for (let i = 0; i < n; i++) {
      // A holds the cap; B asks for one.
      s.aIn = 2;
      s.bDemand = 1;
      while (bCap > 0) await sleep(5);
      await sleep(30);
      const arrived = new Promise<void>((r) => (got = r));
      freedAt = performance.now();
      s.aIn = 1;
      a.nudge();
      await arrived;
      out.push(performance.now() - freedAt);
      got = undefined;
      // B is done with it: back to A.
      s.bDemand = 0;
      await sleep(30);
    }
    return b.grantsTaken;
  } finally {
    a.stop();
    b.stop();
    await conns[0]!.del(`${prefix}:shared-view:x`, `${prefix}:shared-view-asks:x`);
    for (const c of conns) c.disconnect();
  }
}

const q = (xs: number[], p: number): number => {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]!;
};

async function main(): Promise<void> {
  const load0 = loadavg()[0]!.toFixed(1);
  const res = { handover: [] as number[], rounds: [] as number[] };
  let handedOver = 0;
  for (let done = 0; done < TRIALS; done += BLOCK) {
    handedOver += await trials(true, BLOCK, res.handover);
    await trials(false, BLOCK, res.rounds);
  }
  for (const [k, v] of Object.entries(res))
    console.log(
      `${k.padEnd(9)} n ${v.length}  mean ${(v.reduce((s, x) => s + x, 0) / v.length).toFixed(1)} ms  ` +
        `p50 ${q(v, 0.5).toFixed(1)}  p90 ${q(v, 0.9).toFixed(1)}  max ${Math.max(...v).toFixed(1)} ms`,
    );
  console.log(
    `${handedOver} of ${res.handover.length} slots came by hand-over (the rest by B's own round first); ` +
      `load ${load0} → ${loadavg()[0]!.toFixed(1)}`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
