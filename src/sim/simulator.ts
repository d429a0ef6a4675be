/**
 * The discrete-event simulator (design §1): the exact scheduling core and policies the live router
 * runs, the exact engine model the emulated engine runs, on a virtual clock. Deterministic for a
 * seed: no Math.random, no Date, Maps iterated in insertion order, heap ties broken by priority and
 * insertion order.
 *
 * Clocks: the Scheduler (and policies) take milliseconds, like the live router's host clock; the
 * EngineModel, the workload drivers and the records take seconds. `now` below is seconds; every
 * call into the core passes `now * 1000`.
 *
 * Not modelled (kept simple on purpose): router-queue timeouts (`Scheduler.expire` — no scenario
 * configures one), retries after a backend error (engines never fail here), health changes.
 *
 * The run is one router (OneRouter) on the simulator's one event loop (event-loop.ts), which
 * several routers (federation.ts) share too.
 */
import { createPolicy, type PolicySpec } from '../core/policies/index.js';
import { createRng, deriveSeed } from '../core/rng.js';
import type { Scheduler } from '../core/scheduler.js';
import type { Decision, Policy } from '../core/types.js';
import type { Scenario } from '../scenario/types.js';
import type { ClientDriver, ScheduledRequest, WorkloadRequest } from '../workloads/types.js';
import type { OpenRequest, QueueSample } from './engine-fleet.js';
import {
  AmbiguousOrder,
  EventLoop,
  PROBE,
  SAMPLE,
  SEND,
  TIMEOUT,
  type Finished,
  type LoopEvent,
  type LoopHost,
} from './event-loop.js';
import {
  checkConservation,
  newReport,
  openRequest,
  settleFinished,
  type FailureReason,
  type RequestRecord,
  type RouterSample,
  type RunResult,
} from './ledger.js';
import { routerScheduler } from './router-node.js';
// The `rl` policy's weights come from files: this host installs the reader (at policy creation, never per request).
import { readRlWeights } from '../rl/weights-file.js';

export type { FailureReason, RequestRecord, RouterSample, RunResult } from './ledger.js';
export type { QueueSample } from './engine-fleet.js';

export interface SimulateOptions {
  readonly seed: number;
  /** Queue sampling period for charts, virtual seconds (default: run length / 400, ≥ 50 ms; Infinity: off). */
  readonly sampleEveryS?: number;
  /**
   * How often engine load (running, waiting, KV usage) is handed to the core, as a metrics probe
   * or scrape would, virtual seconds (default 0.05; Infinity: never — for policies that ignore it).
   */
  readonly probeEveryS?: number;
  /**
   * Wake each engine at every iteration end (the reference protocol) instead of only where its next
   * iteration may finish, admit or preempt a sequence (default false: `simulate` replays a run
   * with this on when the faster protocol cannot tell the order of two same-instant engine events).
   */
  readonly everyIteration?: boolean;
}

let reruns = 0;
/** How many simulate() runs so far were replayed with every iteration woken (tests, bench:sim). */
export function everyIterationReruns(): number {
  return reruns;
}

interface Event extends LoopEvent {
  /** SEND: the request. */
  readonly request?: WorkloadRequest;
  /** TIMEOUT: the request. */
  readonly open?: OpenRequest;
}

/** Run `scenario` under one policy (seeded from `opts.seed`, as the live router seeds it). */
export function simulate(scenario: Scenario, policySpec: PolicySpec, opts: SimulateOptions): RunResult {
  const policy = (): Policy =>
    createPolicy(policySpec, createRng(deriveSeed(opts.seed, 'policy')), scenario.scheduling, {
      rlWeights: readRlWeights,
    });
  const label = policyLabel(policySpec);
  if (opts.everyIteration !== true) {
    try {
      return runSimulation(scenario, policy(), label, opts, true, true);
    } catch (err) {
      if (!(err instanceof AmbiguousOrder)) throw err;
      reruns++;
    }
  }
  return runSimulation(scenario, policy(), label, opts, false, true);
}

/** Run with a policy object (the oracle passes fixed assignments); every iteration woken. */
export function simulateWith(
  scenario: Scenario,
  policy: Policy,
  label: string,
  opts: SimulateOptions,
): RunResult {
  return runSimulation(scenario, policy, label, opts, false, false);
}

/**
 * One router on the event loop: its scheduler, the run's records, and what it does with sends,
 * finishes, client timeouts, probes and samples.
 */
class OneRouter implements LoopHost<Event> {
  readonly scheduler: Scheduler;
  readonly loop: EventLoop<Event>;
  readonly records: RequestRecord[] = [];
  /** Every request sent, by its index in `records` (EngineSequence.ref). */
  private readonly opens: OpenRequest[] = [];
  openCount = 0;
  readonly samples: QueueSample[] = [];
  readonly routerSamples: RouterSample[] = [];
  readonly driver: ClientDriver;
  // `reuseReports`: one completion report, refilled per finish, and one metrics object per
  // backend, refilled per probe (doubles in a reused object's fields are stored in place; a new
  // object boxes each). Only for the built-in policies (`simulate`), which read reports and
  // metrics while called and keep none of them; a policy object of `simulateWith` may keep them.
  private readonly reused = newReport();
  private readonly makeSend = (it: ScheduledRequest): Event => ({ kind: SEND, request: it.request });

  constructor(
    scenario: Scenario,
    policy: Policy,
    opts: SimulateOptions,
    lazy: boolean,
    private readonly reuseReports: boolean,
  ) {
    this.scheduler = routerScheduler(policy, scenario.fleet);
    this.loop = new EventLoop<Event>(scenario.fleet, {
      seed: opts.seed,
      durationS: scenario.durationS,
      endS: scenario.durationS + scenario.graceS,
      lazy,
    });
    this.driver = scenario.createDriver(opts.seed);
  }

  /** Settle a request as failed and tell its client (closed-loop clients may send a follow-up). */
  private fail(o: OpenRequest, reason: FailureReason): void {
    const now = this.loop.now;
    o.rec.ok = false;
    o.rec.failure = reason;
    o.rec.finishS = now;
    this.openCount--;
    this.loop.schedule(this.driver.onFinish(o.rec.id, now, false, ''), this.makeSend);
  }

  private apply(ds: readonly Decision[]): void {
    const { loop } = this;
    const fleet = loop.fleet;
    for (let k = 0; k < ds.length; k++) {
      const d = ds[k]!;
      // The core hands back the request object it was given: the OpenRequest of open().
      const o = d.request as OpenRequest;
      if (d.type === 'reject') {
        this.fail(o, d.reason);
        continue;
      }
      const i = fleet.byName.get(d.backend)!;
      loop.submit(o, i, fleet.prepare(o, i, d.backend, loop.now));
    }
  }

  open(req: WorkloadRequest): void {
    const now = this.loop.now;
    const o = openRequest(req, now, this.records.length);
    this.records.push(o.rec);
    this.opens.push(o);
    this.openCount++;
    if (req.timeoutS !== undefined && now + req.timeoutS <= this.loop.endS) {
      this.loop.heap.push(now + req.timeoutS, TIMEOUT, { kind: TIMEOUT, open: o });
    }
    this.apply(this.scheduler.submit(o, now * 1000));
  }

  handle(ev: Event): void {
    if (ev.kind === SEND) this.open(ev.request!);
    else this.timeout(ev.open!);
  }

  finished(i: number, e: Finished): void {
    const o = this.opens[e.ref]!;
    const report = this.reuseReports ? this.reused : newReport();
    settleFinished(o.rec, e, 0, report);
    this.loop.fleet.outstanding[i]!--;
    this.openCount--;
    this.apply(this.scheduler.complete(e.id, report, e.t * 1000));
    // Without a prefix cache the answer is '' and closed-loop clients make up its text themselves
    // (same length, seeded).
    this.loop.schedule(this.driver.onFinish(e.id, e.t, true, o.answer), this.makeSend);
  }

  /** The client gave up: drop it from the router queue or the engine, count it failed. */
  private timeout(o: OpenRequest): void {
    if (o.rec.ok !== undefined) return; // already settled
    const { decisions } = this.scheduler.cancel(o.id, this.loop.now * 1000);
    if (o.engine >= 0) this.loop.cancel(o);
    this.fail(o, 'client-timeout');
    this.apply(decisions);
  }

  busy(): boolean {
    return this.scheduler.inFlightTotal > 0 || this.scheduler.queueLength > 0;
  }

  /** Engine load to the core, as a metrics probe or scrape would; then a pump. */
  probe(): void {
    const { loop, scheduler } = this;
    loop.catchUpAll();
    const now = loop.now;
    for (let i = 0; i < loop.fleet.engines.length; i++) {
      // The scheduler keeps the latest as the backend's metrics: refilling it is handing over a
      // new one, to policies that keep none (see reuseReports).
      scheduler.setMetrics(loop.fleet.specs[i]!.name, loop.fleet.metricsOf(i, now, this.reuseReports));
    }
    // Metric-driven policies may now release requests they held.
    this.apply(scheduler.pump(now * 1000));
  }

  sample(): void {
    this.loop.catchUpAll();
    this.loop.fleet.sample(this.loop.now, this.samples);
    this.routerSamples.push({ t: this.loop.now, queued: this.scheduler.queueLength });
  }
}

function runSimulation(
  scenario: Scenario,
  policy: Policy,
  label: string,
  opts: SimulateOptions,
  lazyWakes: boolean,
  reuseReports: boolean,
): RunResult {
  // Lazy wakes only where asked: `simulate` can rerun with a fresh policy on AmbiguousOrder.
  const r = new OneRouter(scenario, policy, opts, lazyWakes && opts.everyIteration !== true, reuseReports);
  const { loop, scheduler } = r;
  const endS = loop.endS;
  // A policy that needs fresh engine state (SP-P) gets probed at least as often as it asks; one
  // that reads no metrics and never holds, not at all. Skipping changes no result: a probe brings
  // engines to the present (in exact steps: EngineModel.quietRun), hands their load to the core
  // and pumps, and such a policy's pump decides nothing new. The same-instant `lateSeen` a probe
  // sets matters only to submits after it at that instant: its own pump's.
  const wanted = policy.traits?.metricsIntervalMs;
  const skipProbes =
    policy.traits?.readsMetrics === false && policy.traits.holds === false && wanted === undefined;
  const probeBase = skipProbes ? Infinity : (opts.probeEveryS ?? 0.05);
  loop.setOpening(openingRequests(r.driver, scenario.durationS));
  loop.every(PROBE, {
    every: wanted === undefined ? probeBase : Math.min(probeBase, wanted / 1000),
    run: () => r.probe(),
  });
  loop.every(SAMPLE, { every: opts.sampleEveryS ?? Math.max(0.05, endS / 400), run: () => r.sample() });
  let cut = loop.run(r);
  // Requests left with nothing to wake them: probes (and samples) would have gone on to the end.
  if (!cut && skipProbes && loop.active()) cut = true;
  if (cut) loop.catchUpToEnd();
  checkConservation(
    r.records,
    r.openCount,
    { inFlight: scheduler.inFlightTotal, queued: scheduler.queueLength, inTransit: 0 },
    loop.fleet.held(),
  );
  return {
    policy: label,
    records: r.records,
    samples: r.samples,
    routerSamples: r.routerSamples,
    backends: loop.fleet.backendStats(),
    simulatedS: cut && r.openCount > 0 ? endS : loop.lastActivity,
  };
}

/**
 * The driver's opening requests sent before `durationS`, one at a time in time order (undefined at
 * the end): a stream is checked to be in order, a list is sorted.
 */
function openingRequests(driver: ClientDriver, durationS: number): () => ScheduledRequest | undefined {
  if (driver.stream) {
    const it = driver.stream();
    let last = -Infinity;
    return () => {
      const r = it.next();
      if (r.done) return undefined;
      const s = r.value;
      if (s.at < last)
        throw new Error(`workload stream out of order: ${s.request.id} at ${s.at}s after ${last}s`);
      last = s.at;
      // In time order: the first one at or after durationS ends the opening.
      if (!(s.at < durationS)) {
        it.return?.();
        return undefined;
      }
      return s;
    };
  }
  const list = driver
    .start()
    .filter((it) => it.at < durationS)
    .sort((a, b) => a.at - b.at);
  let i = 0;
  return () => (i < list.length ? list[i++] : undefined);
}

/**
 * A policy's name as reports show it: a `push` mode as a suffix (`prefix-trie+sp-p`, SkyLB's
 * naming of blind / SP-O / SP-P variants), other parameters appended in parentheses.
 */
export function policyLabel(spec: PolicySpec): string {
  const { push, ...params } = spec.params ?? {};
  const base = typeof push === 'string' ? `${spec.name}+${push}` : spec.name;
  const rest = push === undefined || typeof push === 'string' ? params : (spec.params ?? {});
  const keys = Object.keys(rest);
  return keys.length === 0
    ? base
    : `${base}(${keys.map((k) => `${k}=${JSON.stringify(rest[k])}`).join(',')})`;
}
