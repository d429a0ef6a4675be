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
 */
import { createPolicy, type PolicySpec } from '../core/policies/index.js';
import { createRng, deriveSeed } from '../core/rng.js';
import type { Scheduler } from '../core/scheduler.js';
import type { Decision, Policy } from '../core/types.js';
import type { Scenario } from '../scenario/types.js';
import type { EngineEvent } from '../engine/types.js';
import type { ClientDriver, ScheduledRequest, WorkloadRequest } from '../workloads/types.js';
import { EngineFleet, type OpenRequest, type QueueSample } from './engine-fleet.js';
import { EventHeap } from './event-heap.js';
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

/**
 * Lazy wakes met an ordering only the reference protocol knows: two engine events at one instant
 * whose order decides the results. `simulate` reruns with `everyIteration`.
 */
class AmbiguousOrder extends Error {}

let reruns = 0;
/** How many simulate() runs so far were replayed with every iteration woken (tests, bench:sim). */
export function everyIterationReruns(): number {
  return reruns;
}

const f64 = new Float64Array(1);
// The double's bits as two 32-bit halves (BigInt arithmetic on a 64-bit view allocates per call).
const u32 = new Uint32Array(f64.buffer);
const LO = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 0 : 1;
const HI = 1 - LO;
/** The largest double below x (x > 0): its bits minus one. */
function justBefore(x: number): number {
  f64[0] = x;
  if (u32[LO] === 0) {
    u32[LO] = 0xffffffff;
    u32[HI]!--;
  } else u32[LO]!--;
  return f64[0]!;
}

/** Most iterations an engine runs between wakes under lazy wakes (bounds quietUntil's loop). */
const MAX_QUIET_ITERATIONS = 4096;

// Event kinds double as same-instant priorities: arrivals reach an engine before its iteration
// boundary at that instant is processed (the engine model admits what was submitted at or before an
// iteration's start), finishes beat a client timeout at the same instant, probes and samples see
// the instant's end state.
const SEND = 0;
const ENGINE = 1;
const TIMEOUT = 2;
const PROBE = 3;
const SAMPLE = 4;

interface Event {
  readonly kind: number;
  /** SEND: the request. */
  readonly request?: WorkloadRequest;
  /** ENGINE: backend index. */
  readonly backend?: number;
  /** TIMEOUT: the request. */
  readonly open?: Open;
}

const PROBE_EVENT: Event = { kind: PROBE };
const SAMPLE_EVENT: Event = { kind: SAMPLE };

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

/** A request as the core sees it, and the loop's state for it while it is open (the ledger's entry). */
type Open = OpenRequest;

/** Run with a policy object (the oracle passes fixed assignments); every iteration woken. */
export function simulateWith(
  scenario: Scenario,
  policy: Policy,
  label: string,
  opts: SimulateOptions,
): RunResult {
  return runSimulation(scenario, policy, label, opts, false, false);
}

function runSimulation(
  scenario: Scenario,
  policy: Policy,
  label: string,
  opts: SimulateOptions,
  lazyWakes: boolean,
  reuseReports: boolean,
): RunResult {
  const scheduler: Scheduler = routerScheduler(policy, scenario.fleet);
  // Lazy wakes (simulate's default): an engine is woken only where its next iteration may finish,
  // admit or preempt a sequence; the quiet iterations before run inside advance(), and an engine
  // is brought up to the present before anything submits to, cancels on or reads it. Only
  // `simulate` asks for them, since it can rerun with a fresh policy on AmbiguousOrder.
  const lazy = lazyWakes && opts.everyIteration !== true;
  const heap = new EventHeap<Event>();
  const fleet = new EngineFleet<Event>(
    scenario.fleet,
    heap,
    ENGINE,
    (i) => ({ kind: ENGINE, backend: i }),
    opts.seed,
  );
  const engines = fleet.engines;
  const wakeAt = fleet.wakeAt;
  const driver = scenario.createDriver(opts.seed);
  const endS = scenario.durationS + scenario.graceS;
  const records: RequestRecord[] = [];
  /** Every request sent, by its index in `records` (EngineSequence.ref). */
  const opens: Open[] = [];
  let openCount = 0;
  /** Lazy wakes: per engine, the instant its last wake was processed. */
  const wokenAt: number[] = engines.map(() => -1);
  /** Lazy wakes: at the current instant, an engine event / a later-priority event has been processed. */
  let engineSeen = false;
  let lateSeen = false;
  /** The engine whose wake is being processed (-1: none). */
  let current = -1;
  const samples: QueueSample[] = [];
  const routerSamples: RouterSample[] = [];
  let now = 0;
  let pendingSends = 0;
  let lastActivity = 0;

  const schedule = (items: readonly ScheduledRequest[]): void => {
    for (let k = 0; k < items.length; k++) {
      const it = items[k]!;
      // Nothing is sent at or after durationS (the run then only drains).
      if (!(it.at < scenario.durationS)) continue;
      pendingSends++;
      heap.push(Math.max(it.at, now), SEND, { kind: SEND, request: it.request });
    }
  };

  /**
   * Lazy wakes: run engine i's iterations that end before now (`inclusive`: at now too, as events
   * of a later priority than engine wakes see it). A pending start at now is left to the instant's
   * flush, as the reference protocol leaves it. A finish here means quietUntil missed one.
   */
  const catchUp = (i: number, inclusive: boolean): void => {
    const e = engines[i]!;
    if (now > 0) check(i, e.advance(justBefore(now)));
    if (inclusive && e.iterationEnd === now) check(i, e.advance(now));
  };
  const check = (i: number, events: readonly EngineEvent[]): void => {
    for (let k = 0; k < events.length; k++) {
      const ev = events[k]!;
      if (ev.type === 'finished')
        throw new Error(
          `simulator: ${fleet.specs[i]!.name} finished ${ev.id} at ${ev.t} s, between wakes (EngineModel.quietUntil out of step with its iterations?)`,
        );
    }
  };
  /** Lazy wakes: bring engine i to the present before a request is submitted to it. */
  const beforeSubmit = (i: number): void => {
    if (lateSeen) return catchUp(i, true);
    catchUp(i, false);
    // Submitted while same-instant engine events run: whether i's iteration ending now comes first
    // depended on the reference protocol's push order.
    if (engineSeen && i !== current && (wokenAt[i] === now || engines[i]!.iterationEnd === now))
      throw new AmbiguousOrder();
  };

  /** Set the touched engines' wakes once no more events remain at the current instant. */
  const flushIfInstantOver = (nextSend: number | undefined): void => {
    const ht = heap.peekTime();
    if ((ht === undefined || ht > now) && (nextSend === undefined || nextSend > now))
      fleet.flush(lazy, MAX_QUIET_ITERATIONS);
  };

  /** Settle a request as failed and tell its client (closed-loop clients may send a follow-up). */
  const fail = (o: Open, reason: FailureReason): void => {
    o.rec.ok = false;
    o.rec.failure = reason;
    o.rec.finishS = now;
    openCount--;
    schedule(driver.onFinish(o.rec.id, now, false, ''));
  };

  const apply = (ds: readonly Decision[]): void => {
    for (let k = 0; k < ds.length; k++) {
      const d = ds[k]!;
      // The core hands back the request object it was given: the Open of onSend.
      const o = d.request as Open;
      if (d.type === 'reject') {
        fail(o, d.reason);
        continue;
      }
      const i = fleet.byName.get(d.backend)!;
      const args = fleet.prepare(o, i, d.backend, now);
      if (lazy) beforeSubmit(i);
      fleet.submit(o, i, args, now);
    }
  };

  const onSend = (req: WorkloadRequest): void => {
    const o = openRequest(req, now, records.length);
    records.push(o.rec);
    opens.push(o);
    openCount++;
    if (req.timeoutS !== undefined && now + req.timeoutS <= endS) {
      heap.push(now + req.timeoutS, TIMEOUT, { kind: TIMEOUT, open: o });
    }
    apply(scheduler.submit(o, now * 1000));
  };

  // `reuseReports`: one completion report, refilled per finish, and one metrics object per
  // backend, refilled per probe (doubles in a reused object's fields are stored in place; a new
  // object boxes each). Only for the built-in policies (`simulate`), which read reports and
  // metrics while called and keep none of them; a policy object of `simulateWith` may keep them.
  const reused = newReport();
  const onEngine = (i: number): void => {
    fleet.woken(i);
    const events = engines[i]!.advance(now);
    for (let k = 0; k < events.length; k++) {
      const e = events[k]!;
      if (e.type !== 'finished') continue;
      if (lazy && e.t !== now) check(i, [e]);
      const o = opens[e.ref]!;
      const report = reuseReports ? reused : newReport();
      settleFinished(o.rec, e, 0, report);
      fleet.outstanding[i]!--;
      openCount--;
      apply(scheduler.complete(e.id, report, e.t * 1000));
      // Without a prefix cache the answer is '' and closed-loop clients make up its text themselves
      // (same length, seeded).
      schedule(driver.onFinish(e.id, e.t, true, o.answer));
    }
  };

  /** The client gave up: drop it from the router queue or the engine, count it failed. */
  const onTimeout = (o: Open): void => {
    if (o.rec.ok !== undefined) return; // already settled
    const { decisions } = scheduler.cancel(o.id, now * 1000);
    if (o.engine >= 0) {
      if (lazy) catchUp(o.engine, true);
      fleet.cancel(o, now);
    }
    fail(o, 'client-timeout');
    apply(decisions);
  };

  const active = (): boolean =>
    pendingSends > 0 ||
    first !== undefined ||
    fleet.liveWakes > 0 ||
    scheduler.inFlightTotal > 0 ||
    scheduler.queueLength > 0;

  // A policy that needs fresh engine state (SP-P) gets probed at least as often as it asks; one
  // that reads no metrics and never holds, not at all. Skipping changes no result: a probe brings
  // engines to the present (in exact steps: EngineModel.quietRun), hands their load to the core
  // and pumps, and such a policy's pump decides nothing new. The same-instant `lateSeen` a probe
  // sets matters only to submits after it at that instant: its own pump's.
  const wanted = policy.traits?.metricsIntervalMs;
  const skipProbes =
    policy.traits?.readsMetrics === false && policy.traits.holds === false && wanted === undefined;
  const probeBase = skipProbes ? Infinity : (opts.probeEveryS ?? 0.05);
  const probeEvery = wanted === undefined ? probeBase : Math.min(probeBase, wanted / 1000);
  const sampleEvery = opts.sampleEveryS ?? Math.max(0.05, endS / 400);
  const onProbe = (): void => {
    for (let i = 0; i < engines.length; i++) {
      if (lazy) catchUp(i, true);
      // The scheduler keeps the latest as the backend's metrics: refilling it is handing over a
      // new one, to policies that keep none (see reuseReports).
      scheduler.setMetrics(fleet.specs[i]!.name, fleet.metricsOf(i, now, reuseReports));
    }
    // Metric-driven policies may now release requests they held.
    apply(scheduler.pump(now * 1000));
  };
  const onSample = (): void => {
    if (lazy) for (let i = 0; i < engines.length; i++) catchUp(i, true);
    fleet.sample(now, samples);
    routerSamples.push({ t: now, queued: scheduler.queueLength });
  };

  // The opening requests (all of an open-loop workload) are read by a cursor in time order, not
  // heap entries: the heap then holds only engine wakes, follow-ups, timeouts and the two periodic
  // events, so it stays small. A driver that streams (trace replay) is read one request ahead, so
  // memory stays flat in trace length; otherwise start()'s list is sorted (stably: equal times keep
  // the driver's order, and they beat heap events at the same instant as their SEND priority and
  // earlier insertion would).
  const opening = openingRequests(driver, scenario.durationS);
  let first = opening();
  if (Number.isFinite(probeEvery)) heap.push(0, PROBE, PROBE_EVENT);
  if (Number.isFinite(sampleEvery)) heap.push(0, SAMPLE, SAMPLE_EVENT);
  let cut = false;
  for (;;) {
    const ht = heap.peekTime();
    const head = first;
    const fromList = head !== undefined && (ht === undefined || Math.max(0, head.at) <= ht);
    const t = fromList ? Math.max(0, head.at) : ht;
    if (t === undefined) break;
    if (t > endS) {
      cut = true;
      break;
    }
    if (t !== now) {
      engineSeen = false;
      lateSeen = false;
    }
    now = t;
    if (fromList) {
      const sent = head.request;
      first = opening();
      lastActivity = now;
      onSend(sent);
      if (fleet.dirtyCount > 0) flushIfInstantOver(first?.at);
      continue;
    }
    const ev = heap.pop()!;
    switch (ev.kind) {
      case SEND:
        pendingSends--;
        lastActivity = now;
        onSend(ev.request!);
        break;
      case ENGINE: {
        const b = ev.backend!;
        if (wakeAt[b] !== now) break;
        lastActivity = now;
        if (lazy) {
          // Two engines woken at one instant: their order was the reference protocol's push order.
          if (engineSeen) throw new AmbiguousOrder();
          engineSeen = true;
          wokenAt[b] = now;
          current = b;
          onEngine(b);
          current = -1;
          break;
        }
        onEngine(b);
        // While this engine alone is touched and its next iteration end is strictly the run's
        // next event, take that wake here: flush would push it and the loop pop it at once, so
        // this is the same events in the same order, minus a heap push and pop per iteration.
        while (fleet.dirtyCount === 1 && fleet.dirtyList[0] === b) {
          const ht = heap.peekTime() ?? Infinity;
          const next = first !== undefined ? Math.max(0, first.at) : Infinity;
          if (!(ht > now && next > now)) break; // the instant is not over
          const t = engines[b]!.nextEventTime();
          if (t === undefined || !(t < ht && t < next) || t > endS) break;
          fleet.dirty[b] = false;
          fleet.dirtyCount = 0;
          wakeAt[b] = t;
          fleet.liveWakes++;
          now = t;
          lastActivity = now;
          onEngine(b);
        }
        break;
      }
      case TIMEOUT:
        lateSeen = true;
        onTimeout(ev.open!);
        break;
      case PROBE:
        lateSeen = true;
        onProbe();
        // Probes and samples only matter while something is pending; an idle run ends.
        if (active()) heap.push(now + probeEvery, PROBE, PROBE_EVENT);
        break;
      default:
        lateSeen = true;
        onSample();
        if (active()) heap.push(now + sampleEvery, SAMPLE, SAMPLE_EVENT);
    }
    if (fleet.dirtyCount > 0) flushIfInstantOver(first?.at);
  }

  // Requests left with nothing to wake them: probes (and samples) would have gone on to the end.
  if (!cut && skipProbes && active()) cut = true;
  // Cut off: the reference protocol ran every iteration up to the end; lazy engines catch up.
  if (cut && lazy) {
    now = endS;
    for (let i = 0; i < engines.length; i++) catchUp(i, true);
  }
  checkConservation(
    records,
    openCount,
    { inFlight: scheduler.inFlightTotal, queued: scheduler.queueLength, inTransit: 0 },
    fleet.held(),
  );
  return {
    policy: label,
    records,
    samples,
    routerSamples,
    backends: fleet.backendStats(),
    simulatedS: cut && openCount > 0 ? endS : lastActivity,
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
