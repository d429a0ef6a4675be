/**
 * The simulator for more than one router (issue #19): a router per region with its own clients and
 * replicas, forwarding to peers by SkyLB Algorithm 1 across one-way latencies (`regions`), or N
 * routers in front of one fleet with or without a shared in-flight view (`routers`). Same pieces as
 * the single-router simulator (simulator.ts): the scheduling core and policies, the engine model,
 * the workload drivers, and the live router's federation decision (src/federation/federation.ts).
 * Deterministic for a seed.
 *
 * Latency: a client reaches its own region's router at no cost; a forwarded request reaches the
 * peer one one-way latency later and its answer (first token and end) comes back one later. Peer
 * statuses are as stale as a probe across that link: taken at the peer, read one way later.
 */
import { createPolicy } from '../core/policies/index.js';
import { readRlWeights } from '../rl/weights-file.js';
import { createRng, deriveSeed } from '../core/rng.js';
import type { Scheduler } from '../core/scheduler.js';
import { HOLD } from '../core/types.js';
import type { CompletionReport, Decision, Policy, RequestInfo } from '../core/types.js';
import { availableReplicas } from '../federation/availability.js';
import { Federation } from '../federation/federation.js';
import { QueuedForwards } from '../federation/queue-forward.js';
import { withSharedView } from '../federation/shared-view-policy.js';
import type { PeerStatus } from '../federation/types.js';
import type { Scenario } from '../scenario/types.js';
import type { ClientDriver, ScheduledRequest, WorkloadRequest } from '../workloads/types.js';
import { EngineFleet, type OpenRequest, type QueueSample } from './engine-fleet.js';
import { EventHeap } from './event-heap.js';
import { federationMode } from './federation-modes.js';
import {
  newReport,
  openRequest,
  settleFinished,
  type RequestRecord,
  type RouterSample,
  type RunResult,
} from './ledger.js';
import { routerScheduler } from './router-node.js';
import type { SimulateOptions } from './simulator.js';
import type { PolicySpec } from '../core/policies/index.js';

/** Per router: what it saw and did. */
export interface RouterStats {
  readonly name: string;
  /** Requests its own clients sent it. */
  arrived: number;
  /** Of those, forwarded to a peer. */
  forwardedOut: number;
  /** Requests peers forwarded to it. */
  servedForPeers: number;
}

export interface FederationRunResult extends RunResult {
  readonly routers: readonly RouterStats[];
}

const SEND = 0;
const ARRIVE = 1;
const ENGINE = 2;
const TIMEOUT = 3;
const PEER = 4;
const PROBE = 5;
const SYNC = 6;
const SAMPLE = 7;
/** shared-state: one router's push or answer reaching the others. */
const SHARE = 8;

interface Event {
  readonly kind: number;
  readonly request?: WorkloadRequest;
  /** SEND/ARRIVE/PEER: router index. */
  readonly router?: number;
  readonly driver?: number;
  readonly backend?: number;
  readonly id?: string;
  /** PEER: which peer the status is of, and the status. */
  readonly peer?: number;
  readonly status?: PeerStatus;
  /** SHARE: what router `router` published. */
  readonly share?: Shared;
}

const NONE_SINCE = { dispatched: 0, completed: 0 } as const;

/**
 * What one router publishes for the others (shared-state): a push (no report), an answer, or a
 * request it starts or stops holding in its queue (`hold`).
 */
interface Shared {
  readonly req: RequestInfo;
  readonly backend: string;
  readonly report: CompletionReport | undefined;
  readonly hold?: boolean;
}

interface Router {
  readonly name: string;
  readonly region: string | undefined;
  readonly scheduler: Scheduler;
  /** Engine indices this router pushes to. */
  readonly engines: readonly number[];
  readonly federation: Federation | undefined;
  /** Own clients' requests waiting in its scheduler queue, oldest first (forwarding candidates). */
  readonly waiting: QueuedForwards | undefined;
  readonly stats: RouterStats;
  /** Other routers' in-flight per backend at the last share (shared-view, shared-state). */
  readonly others: Map<string, number>;
  /** shared-state: the others' pushes and answers per backend since this router's last probe. */
  readonly since: Map<string, { dispatched: number; completed: number }>;
  /** shared-state: requests the other routers hold in their queues, by id. */
  readonly remoteHeld: Map<string, RequestInfo>;
  /** shared-state: the policy the others' pushes and answers are applied to. */
  readonly inner: Policy;
  /** shared-state: backends whose shared state changed since this router's scheduler was told. */
  readonly changed: Set<string>;
}

interface Open extends OpenRequest {
  readonly driver: number;
  /** The client's router. */
  readonly origin: number;
  /** The router that scheduled it (origin, or the peer it was forwarded to). */
  router: number;
  /** One-way latency back to the origin (0 when served locally). */
  backS: number;
  /** shared-state: published as held in its router's queue. */
  held: boolean;
}

/** Run a `regions` or `routers` scenario under one of its federation policies. */
export function simulateFederation(
  scenario: Scenario,
  spec: PolicySpec,
  opts: SimulateOptions,
): FederationRunResult {
  const regions = scenario.regions;
  const routersCfg = scenario.routers;
  if (!regions && !routersCfg) throw new Error(`scenario '${scenario.name}' has neither regions nor routers`);
  const mode = federationMode(spec, regions ? 'regions' : 'routers');
  const fleet = scenario.fleet;
  const heap = new EventHeap<Event>();
  const engineFleet = new EngineFleet<Event>(
    fleet,
    heap,
    ENGINE,
    (i) => ({ kind: ENGINE, backend: i }),
    opts.seed,
  );
  const engines = engineFleet.engines;

  // Routers: one per region, or `count` in front of the whole fleet ('single' keeps one).
  const routerDefs: { name: string; region: string | undefined; engines: number[] }[] = regions
    ? regions.list.map((r) => ({
        name: r.name,
        region: r.name,
        engines: fleet.flatMap((b, i) => (b.region === r.name ? [i] : [])),
      }))
    : Array.from({ length: mode.sharing === 'single' ? 1 : routersCfg!.count }, (_, k) => ({
        name: `router-${k}`,
        region: undefined,
        engines: fleet.map((_b, i) => i),
      }));
  const routers: Router[] = routerDefs.map((d, k) => {
    let policy = createPolicy(
      mode.local,
      createRng(deriveSeed(opts.seed, `policy:${d.name}`)),
      scenario.scheduling,
      { rlWeights: readRlWeights },
    );
    const others = new Map<string, number>();
    const inner = policy;
    if (mode.sharing === 'shared-view') policy = withSharedView(policy, (n) => others.get(n) ?? 0);
    const since = new Map<string, { dispatched: number; completed: number }>();
    const remoteHeld = new Map<string, RequestInfo>();
    if (mode.sharing === 'shared-state') {
      policy = withSharedView(
        policy,
        (n) => others.get(n) ?? 0,
        (n) => since.get(n) ?? NONE_SINCE,
      );
      // Every push and answer is published (after the policy saw it) for the others to apply.
      const onDispatch = policy.onDispatch;
      const onComplete = policy.onComplete;
      policy.onDispatch = (req, b, at) => {
        onDispatch?.(req, b, at);
        publish(k, { req, backend: b.name, report: undefined });
      };
      policy.onComplete = (req, b, report, at) => {
        onComplete?.(req, b, report, at);
        publish(k, { req, backend: b.name, report });
      };
      // One queue across routers: a request waits while another router holds one of its model
      // that goes first (higher response ratio, as one router's queue orders them); that router
      // takes the room when it hears of it.
      const rr = policy.queueOrder?.kind === 'response-ratio' ? policy.queueOrder : undefined;
      if (rr) {
        const pick = policy.pick.bind(policy);
        const ratio = (q: RequestInfo, at: number): number => {
          const size = rr.size(q);
          return (Math.max(0, at - q.arrivedAt) / 1000 + size) / size;
        };
        const outranked = (req: RequestInfo, at: number): boolean => {
          let mine = NaN;
          for (const q of remoteHeld.values()) {
            if (q.model !== req.model) continue;
            if (mine !== mine) mine = ratio(req, at);
            const theirs = ratio(q, at);
            if (theirs > mine || (theirs === mine && q.arrivedAt < req.arrivedAt)) return true;
          }
          return false;
        };
        // Deferred for another router's request: not a hold on load (asked again at every pump).
        policy.pick = (req, c, at) =>
          remoteHeld.size > 0 && outranked(req, at) ? HOLD.retry : pick(req, c, at);
      }
    }
    const scheduler: Scheduler = routerScheduler(
      policy,
      d.engines.map((i) => fleet[i]!),
    );
    const federation =
      regions && mode.forwarding
        ? new Federation({
            region: d.name,
            selection: mode.forwarding,
            tau: regions.tau,
            // Statuses arrive every peerProbeS; one missing a few rounds means nothing any more.
            statusTtlMs: Math.max(1000, regions.peerProbeS * 5000 + 2000 * regions.oneWayS(d.name, d.name)),
            peers: routerDefs
              .filter((_p, j) => j !== k)
              .map((p) => ({ name: p.name, url: `sim://${p.name}`, region: p.name })),
          })
        : undefined;
    return {
      name: d.name,
      region: d.region,
      scheduler,
      engines: d.engines,
      federation,
      waiting: federation
        ? new QueuedForwards(
            federation,
            () => availableReplicas(scheduler.backendViews(), now * 1000) > 0,
            () => now * 1000,
          )
        : undefined,
      stats: { name: d.name, arrived: 0, forwardedOut: 0, servedForPeers: 0 },
      others,
      since,
      remoteHeld,
      inner,
      changed: new Set<string>(),
    };
  });
  const routerIndex = new Map(routers.map((r, i) => [r.name, i]));
  const oneWay = (a: number, b: number): number =>
    regions ? regions.oneWayS(routers[a]!.name, routers[b]!.name) : 0;

  const drivers: ClientDriver[] = regions
    ? regions.list.map((r) => r.createDriver(deriveSeed(opts.seed, `region:${r.name}`)))
    : [scenario.createDriver(opts.seed)];

  const endS = scenario.durationS + scenario.graceS;
  const records: RequestRecord[] = [];
  const open = new Map<string, Open>();
  const wakeAt = engineFleet.wakeAt;
  const samples: QueueSample[] = [];
  const routerSamples: RouterSample[] = [];
  let now = 0;
  let pendingSends = 0;
  let inTransit = 0;
  let lastActivity = 0;
  let nextRouter = 0;
  /** shared-state: routers with backends whose shared state changed (see tellChanges). */
  const changedRouters = new Set<number>();

  /** Router j pushed or answered: the others apply it `lagS` later (at once for 0). */
  function publish(j: number, s: Shared): void {
    if (mode.lagS === 0) deliver(j, s);
    else heap.push(now + mode.lagS, SHARE, { kind: SHARE, router: j, share: s });
  }
  /** What router j published reaches every other router: its counts and its policy's state. */
  function deliver(j: number, s: Shared): void {
    routers.forEach((r, k) => {
      if (k === j) return;
      if (s.hold !== undefined) {
        if (s.hold) r.remoteHeld.set(s.req.id, s.req);
        else r.remoteHeld.delete(s.req.id);
        return;
      }
      const view = r.scheduler.backend(s.backend);
      if (!view) return;
      r.others.set(s.backend, (r.others.get(s.backend) ?? 0) + (s.report ? -1 : 1));
      let c = r.since.get(s.backend);
      if (!c) r.since.set(s.backend, (c = { dispatched: 0, completed: 0 }));
      if (s.report) c.completed++;
      else c.dispatched++;
      if (s.report) r.inner.onComplete?.(s.req, view, s.report, now * 1000);
      else r.inner.onDispatch?.(s.req, view, now * 1000);
      r.changed.add(s.backend);
      changedRouters.add(k);
    });
  }

  const schedule = (driver: number, items: readonly ScheduledRequest[]): void => {
    for (const it of items) {
      if (!(it.at < scenario.durationS)) continue;
      pendingSends++;
      // In a routers scenario the balancer in front spreads requests over the routers in turn.
      const router = regions ? driver : nextRouter++ % routers.length;
      heap.push(Math.max(it.at, now), SEND, { kind: SEND, request: it.request, router, driver });
    }
  };

  const finishToClient = (o: Open, t: number, ok: boolean): void => {
    open.delete(o.rec.id);
    schedule(o.driver, drivers[o.driver]!.onFinish(o.rec.id, t, ok, o.answer));
  };

  const apply = (r: Router, ds: readonly Decision[]): void => {
    for (const d of ds) {
      // The core hands back the request object it was given: the Open of onSend.
      const o = d.request as Open;
      r.waiting?.remove(o.rec.id);
      if (o.held) unhold(o);
      if (d.type === 'reject') {
        o.rec.ok = false;
        o.rec.failure = d.reason;
        o.rec.finishS = now + o.backS;
        finishToClient(o, now + o.backS, false);
        continue;
      }
      const i = engineFleet.byName.get(d.backend)!;
      engineFleet.submit(o, i, engineFleet.prepare(o, i, d.backend, now), now);
    }
  };

  const localAvailable = (r: Router): boolean =>
    availableReplicas(r.scheduler.backendViews(), now * 1000) > 0;

  /** `o` leaves router k for `peerName` (already counted by its Federation). */
  const forward = (k: number, o: Open, peerName: string): void => {
    const r = routers[k]!;
    const p = routerIndex.get(peerName)!;
    r.stats.forwardedOut++;
    o.backS = oneWay(k, p);
    inTransit++;
    heap.push(now + o.backS, ARRIVE, { kind: ARRIVE, id: o.rec.id, router: p });
  };

  /**
   * Forward the oldest of this router's own waiting requests while no local replica is available
   * and a peer is (Algorithm 1 at the head of the FCFS queue; src/federation/queue-forward.ts).
   */
  const drain = (k: number): void => {
    routers[k]!.waiting?.drain();
  };

  const submitAt = (k: number, o: Open, own: boolean): void => {
    const r = routers[k]!;
    o.router = k;
    if (own)
      r.waiting?.add(o, (d) => {
        r.scheduler.cancel(o.rec.id, now * 1000);
        forward(k, o, d.peer);
        return true;
      });
    apply(r, r.scheduler.submit(o, now * 1000));
    if (mode.sharing === 'shared-state' && o.rec.dispatchS === undefined && o.rec.ok === undefined) {
      o.held = true;
      publish(k, { req: o, backend: '', report: undefined, hold: true });
    }
  };
  const unhold = (o: Open): void => {
    o.held = false;
    publish(o.router, { req: o, backend: '', report: undefined, hold: false });
  };

  const onSend = (req: WorkloadRequest, k: number, driver: number): void => {
    const o: Open = Object.assign(openRequest(req, now, records.length), {
      driver,
      origin: k,
      router: k,
      backS: 0,
      held: false,
    });
    records.push(o.rec);
    open.set(req.id, o);
    if (req.timeoutS !== undefined && now + req.timeoutS <= endS) {
      heap.push(now + req.timeoutS, TIMEOUT, { kind: TIMEOUT, id: req.id });
    }
    const r = routers[k]!;
    r.stats.arrived++;
    if (r.federation && r.waiting!.size === 0) {
      const d = r.federation.route(o, false, localAvailable(r), now * 1000);
      if (d.kind === 'peer') {
        r.federation.onForwarded(o, d.peer);
        forward(k, o, d.peer);
        return;
      }
    }
    submitAt(k, o, true);
    drain(k);
  };

  const onArrive = (id: string, k: number): void => {
    inTransit--;
    const o = open.get(id);
    if (!o) return; // the client gave up meanwhile
    routers[k]!.stats.servedForPeers++;
    // Hop marker: a forwarded request is scheduled here and never forwarded again.
    submitAt(k, o, false);
  };

  const onEngine = (i: number): void => {
    engineFleet.woken(i);
    for (const e of engines[i]!.advance(now)) {
      if (e.type !== 'finished') continue;
      const o = open.get(e.id)!;
      const report = newReport();
      settleFinished(o.rec, e, o.backS, report);
      engineFleet.outstanding[i]!--;
      const r = routers[o.router]!;
      const ds = r.scheduler.complete(e.id, report, e.t * 1000);
      if (o.router !== o.origin) routers[o.origin]!.federation?.onDone(r.name, true, now * 1000);
      finishToClient(o, o.rec.finishS!, true);
      apply(r, ds);
    }
  };

  const onTimeout = (id: string): void => {
    const o = open.get(id);
    if (!o) return;
    const r = routers[o.router]!;
    r.waiting?.remove(id);
    if (o.held) unhold(o);
    const { decisions } = r.scheduler.cancel(id, now * 1000);
    if (o.engine >= 0) engineFleet.cancel(o, now);
    o.rec.ok = false;
    o.rec.failure = 'client-timeout';
    o.rec.finishS = now;
    finishToClient(o, now, false);
    apply(r, decisions);
  };

  const probeBase = opts.probeEveryS ?? 0.05;
  const wanted = routers[0]!.scheduler.metricsIntervalMs;
  const probeEvery = wanted === undefined ? probeBase : Math.min(probeBase, wanted / 1000);
  const sampleEvery = opts.sampleEveryS ?? Math.max(0.05, endS / 400);
  const onProbe = (): void => {
    for (const r of routers) {
      for (const i of r.engines) r.scheduler.setMetrics(fleet[i]!.name, engineFleet.metricsOf(i, now, false));
      // The scrape counts what every router pushed before it.
      r.since.clear();
    }
    routers.forEach((r, k) => {
      apply(r, r.scheduler.pump(now * 1000));
      drain(k);
    });
  };
  const onPeerProbe = (): void => {
    routers.forEach((r, k) => {
      if (!r.federation) return;
      routers.forEach((p, j) => {
        if (j === k) return;
        const status: PeerStatus = {
          region: p.name,
          availableReplicas: availableReplicas(p.scheduler.backendViews(), now * 1000, mode.lendKvBelow),
          queueLength: p.scheduler.queueLength,
        };
        heap.push(now + oneWay(j, k), PEER, { kind: PEER, router: k, peer: j, status });
      });
    });
  };
  const onSync = (): void => {
    // What each router would read back from Redis: every other router's in-flight per backend.
    const counts = routers.map((r) => r.scheduler.backendViews().map((b) => [b.name, b.inFlight] as const));
    routers.forEach((r, k) => {
      const before = new Map(r.others);
      r.others.clear();
      counts.forEach((list, j) => {
        if (j === k) return;
        for (const [n, c] of list) r.others.set(n, (r.others.get(n) ?? 0) + c);
      });
      // A hold on load is asked again only when a backend changes: the others' counts are its load.
      for (const [n, c] of r.others)
        if ((before.get(n) ?? 0) !== c) apply(r, r.scheduler.updateBackend(n, {}, now * 1000));
    });
  };
  const onSample = (): void => {
    engineFleet.sample(now, samples);
    let queued = 0;
    for (const r of routers) queued += r.scheduler.queueLength;
    routerSamples.push({ t: now, queued });
  };

  const active = (): boolean =>
    pendingSends > 0 ||
    inTransit > 0 ||
    engineFleet.liveWakes > 0 ||
    routers.some((r) => r.scheduler.inFlightTotal > 0 || r.scheduler.queueLength > 0);

  drivers.forEach((d, j) => schedule(j, d.start()));
  const peerEvery = regions && mode.forwarding ? regions.peerProbeS : Infinity;
  const syncEvery = mode.sharing === 'shared-view' ? routersCfg!.syncS : Infinity;
  const periodic: [number, number][] = [
    [PROBE, probeEvery],
    [PEER, peerEvery],
    [SYNC, syncEvery],
    [SAMPLE, sampleEvery],
  ];
  for (const [kind, every] of periodic)
    if (Number.isFinite(every)) heap.push(0, kind, { kind: kind === PEER ? -1 : kind });
  let cut = false;
  for (;;) {
    const t = heap.peekTime();
    if (t === undefined) break;
    if (t > endS) {
      cut = true;
      break;
    }
    now = t;
    const ev = heap.pop()!;
    switch (ev.kind) {
      case SEND:
        pendingSends--;
        lastActivity = now;
        onSend(ev.request!, ev.router!, ev.driver!);
        break;
      case ARRIVE:
        lastActivity = now;
        onArrive(ev.id!, ev.router!);
        break;
      case ENGINE:
        if (wakeAt[ev.backend!] === now) {
          lastActivity = now;
          onEngine(ev.backend!);
        }
        break;
      case TIMEOUT:
        onTimeout(ev.id!);
        break;
      case PEER: {
        const r = routers[ev.router!]!;
        r.federation!.setStatus(routers[ev.peer!]!.name, ev.status!, now * 1000);
        drain(ev.router!);
        break;
      }
      case -1:
        onPeerProbe();
        if (active()) heap.push(now + peerEvery, PEER, { kind: -1 });
        break;
      case PROBE:
        onProbe();
        if (active()) heap.push(now + probeEvery, PROBE, { kind: PROBE });
        break;
      case SHARE:
        deliver(ev.router!, ev.share!);
        break;
      case SYNC:
        onSync();
        if (active()) heap.push(now + syncEvery, SYNC, { kind: SYNC });
        break;
      default:
        onSample();
        if (active()) heap.push(now + sampleEvery, SAMPLE, { kind: SAMPLE });
    }
    // A hold on load is asked again only when a backend changes: the shared state is its load.
    while (changedRouters.size > 0) {
      const [k] = changedRouters;
      changedRouters.delete(k!);
      const r = routers[k!]!;
      const names = [...r.changed];
      r.changed.clear();
      for (const n of names) apply(r, r.scheduler.updateBackend(n, {}, now * 1000));
    }
    if (engineFleet.dirtyCount > 0) {
      const ht = heap.peekTime();
      if (ht === undefined || ht > now) engineFleet.flush(false, 0);
    }
  }

  return {
    policy: mode.label,
    records,
    samples,
    routerSamples,
    backends: engineFleet.backendStats(),
    simulatedS: cut && open.size > 0 ? endS : lastActivity,
    routers: routers.map((r) => r.stats),
  };
}
