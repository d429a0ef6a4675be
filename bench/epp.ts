/**
 * `npm run bench:epp`: `llmlb epp` (src/epp) under BENCH_EPP_STREAMS concurrent ext_proc streams
 * (1,000), each one HTTP request as Envoy's ext_proc filter streams it in FULL_DUPLEX_STREAMED
 * mode: headers, a ~1 KB chat body in 3 chunks, end of stream → the pick → the body handed back →
 * a 200 response with usage streamed back for accounting. The picker runs alone in a child process
 * (bench/epp-picker-child.ts) so its CPU time is its own.
 *
 * Figures: decision added latency — the picker's own, from the request's end of stream to the
 * headers answer written (p50 / p99), and as this gateway sees it (plus gRPC both ways and this
 * process's own scheduling); picker CPU µs per request (process.cpuUsage over the measured run:
 * the whole stream, protobuf and HTTP/2 included). Targets: p50 ≤ 0.5 ms, p99 ≤ 2 ms.
 * Knobs: BENCH_EPP_STREAMS (1000), BENCH_EPP_REQUESTS (20000), BENCH_EPP_BACKENDS (8),
 * BENCH_EPP_POLICY (estimated-wait), BENCH_EPP_CONNECTIONS (4 gateway connections),
 * BENCH_EPP_NODE_FLAGS (Node flags for the picker, e.g. --single-threaded-gc), BENCH_EPP_PROF=1
 * (a CPU profile of the picker in bench-out/epp-prof).
 */
import { fork } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { FakeEnvoy } from '../src/epp/envoy.testing.js';
import type { PickerReport } from './epp-picker-child.js';
import { envInt, isReadyMessage } from './common.js';

const STREAMS = envInt('BENCH_EPP_STREAMS', 1000, 1);
const REQUESTS = envInt('BENCH_EPP_REQUESTS', 20_000, 1);
const CONNECTIONS = envInt('BENCH_EPP_CONNECTIONS', 4, 1);
const WARMUP = Math.min(REQUESTS, 2 * STREAMS);

const body = (i: number): Buffer =>
  Buffer.from(
    JSON.stringify({
      model: 'm1',
      messages: [
        { role: 'system', content: 'You are a helpful assistant. '.repeat(10) },
        { role: 'user', content: `Question ${i % 97}: ${'tell me about load balancing. '.repeat(20)}` },
      ],
      max_tokens: 64,
    }),
  );
const ANSWER = JSON.stringify({
  id: 'x',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 250, completion_tokens: 20, total_tokens: 270 },
});

async function main(): Promise<void> {
  const child = fork(new URL('./epp-picker-child.ts', import.meta.url), [], {
    execArgv: [
      '--import',
      'tsx',
      ...(process.env.BENCH_EPP_NODE_FLAGS ?? '').split(' ').filter(Boolean),
      ...(process.env.BENCH_EPP_PROF ? ['--cpu-prof', '--cpu-prof-dir=bench-out/epp-prof'] : []),
    ],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const addr = await new Promise<string>((resolve, reject) => {
    child.once('exit', (c) => reject(new Error(`picker exited ${c}`)));
    child.on('message', (m) => {
      if (isReadyMessage(m)) resolve(m.urls[0]!);
    });
  });
  const report = (): Promise<PickerReport> =>
    new Promise((resolve) => {
      const on = (m: unknown): void => {
        if (typeof m === 'object' && m !== null && (m as { type?: unknown }).type === 'report') {
          child.off('message', on);
          resolve(m as PickerReport);
        }
      };
      child.on('message', on);
      child.send('report');
    });
  const envoys = Array.from({ length: CONNECTIONS }, () => new FakeEnvoy(addr, { ownConnection: true }));
  const bodies = Array.from({ length: 97 }, (_, i) => body(i));
  const gatewayMs: number[] = [];
  let failed = 0;
  const run = async (total: number, record: boolean): Promise<number> => {
    let next = 0;
    const t0 = performance.now();
    const worker = async (w: number): Promise<void> => {
      const envoy = envoys[w % envoys.length]!;
      while (next < total) {
        const i = next++;
        const r = await envoy.request({
          body: bodies[i % bodies.length]!,
          split: [400, 300],
          fakeResponse: { status: 200, body: ANSWER, headers: { 'content-type': 'application/json' } },
        });
        if (r.status !== 200) failed++;
        if (record && r.decisionMs !== undefined) gatewayMs.push(r.decisionMs);
      }
    };
    await Promise.all(Array.from({ length: STREAMS }, (_, w) => worker(w)));
    return (performance.now() - t0) / 1000;
  };
  await run(WARMUP, false);
  child.send('mark');
  const wallS = await run(REQUESTS, true);
  const r = await report();
  gatewayMs.sort((a, b) => a - b);
  const q = (p: number): number =>
    gatewayMs[Math.min(gatewayMs.length - 1, Math.floor(p * gatewayMs.length))]!;
  const f = (ms: number): string => ms.toFixed(3);
  console.log(
    `llmlb epp: ${REQUESTS} requests over ${STREAMS} concurrent ext_proc streams (${CONNECTIONS} gateway connections), policy ${r.policy}, ${cpus().length} CPUs`,
  );
  console.log(`  throughput            ${(REQUESTS / wallS).toFixed(0)} req/s (${wallS.toFixed(1)} s)`);
  console.log(
    `  decision (picker)     p50 ${f(r.p50)} ms  p99 ${f(r.p99)} ms  max ${f(r.max)} ms  (${r.decisions} picked at once)   target p50 ≤ 0.5, p99 ≤ 2: ${r.p50 <= 0.5 && r.p99 <= 2 ? 'met' : 'NOT met'}`,
  );
  if (r.held > 0)
    console.log(
      `  held by the policy    ${r.held} requests waited in the router queue first: p50 ${f(r.heldP50)} ms  p99 ${f(r.heldP99)} ms (the policy's choice, as in serve)`,
    );
  console.log(
    `  decision (gateway)    p50 ${f(q(0.5))} ms  p99 ${f(q(0.99))} ms  (gRPC both ways and this process's load included)`,
  );
  console.log(
    `  picker CPU            ${r.cpuUsPerRequest.toFixed(0)} µs per request (whole stream: protobuf, HTTP/2, pick, accounting)`,
  );
  console.log(
    `  picker GC             ${r.gcCount} collections (${r.gcMajor} major), ${f(r.gcTotalMs)} ms in all, longest ${f(r.gcMaxMs)} ms; heap after ${r.heapMb.toFixed(0)} MB; machine load average ${loadavg()[0]!.toFixed(1)} on ${cpus().length} CPUs`,
  );
  console.log(
    `  failed ${failed}; after the run: streams open ${r.open}, in flight ${r.inFlight}, queued ${r.queued}`,
  );
  for (const e of envoys) e.close();
  child.disconnect();
  if (failed > 0 || r.inFlight !== 0 || r.queued !== 0) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
