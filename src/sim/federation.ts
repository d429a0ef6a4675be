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
 *
 * The routers (Routers) run on the simulator's one event loop (event-loop.ts), as one router does;
 * what N routers share of policy state is shared-state.ts.
 *
 * Over ~500 lines on purpose: Routers is the loop's one host for both kinds of scenario, and its
 * handlers (send, arrive, apply, timeout, probes, shares) all read and write the same open requests.
 */
import { createPolicy } from '../core/policies/index.js';
import { readRlWeights } from '../rl/weights-file.js';
import { createRng, deriveSeed } from '../core/rng.js';
import type { Scheduler } from '../core/scheduler.js';
import type { Decision } from '../core/types.js';
import { availableReplicas } from '../federation/availability.js';
import { Federation } from '../federation/federation.js';
import { QueuedForwards } from '../federation/queue-forward.js';
import type { PeerStatus } from '../federation/types.js';
import type { Scenario } from '../scenario/types.js';
import type { ClientDriver, ScheduledRequest, WorkloadRequest } from '../workloads/types.js';
import type { OpenRequest, QueueSample } from './engine-fleet.js';
import {
  ARRIVE,
  EventLoop,
  PEER,
  PROBE,
  SAMPLE,
  SEND,
  SHARE,
  SYNC,
  TIMEOUT,
  type Finished,
  type LoopEvent,
  type LoopHost,
} from './event-loop.js';
import { federationMode, type FederationMode } from './federation-modes.js';
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
import { receiveShared, sharedPolicy, syncOthers, type Shared, type SharedViews } from './shared-state.js';

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

interface Event extends LoopEvent {
  readonly request?: WorkloadRequest;
  /** ARRIVE: a sequenced router's own request, back from reading the log (shared-state, sequenced). */
  readonly own?: boolean;
  /** SEND/ARRIVE/PEER/SHARE: router index. */
  readonly router?: number;
  readonly driver?: number;
  readonly id?: string;
  /** PEER: which peer the status is of, and the status. */
  readonly peer?: number;
  readonly status?: PeerStatus;
  /** SHARE: what router `router` published. */
  readonly share?: Shared;
}

interface Router {
  readonly name: string;
  readonly scheduler: Scheduler;
  /** Engine indices this router pushes to. */
  readonly engines: readonly number[];
  readonly federation: Federation | undefined;
  /** Own clients' requests waiting in its scheduler queue, oldest first (forwarding candidates). */
  readonly waiting: QueuedForwards | undefined;
  readonly stats: RouterStats;
  /** What it sees of the other routers (shared-view, shared-state). */
  readonly views: SharedViews;
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
  const run = new Routers(scenario, mode, opts);
  const { loop, routers } = run;
  const endS = loop.endS;
  run.drivers.forEach((d, j) => run.schedule(j, d.start()));
  const probeBase = opts.probeEveryS ?? 0.05;
  const wanted = routers[0]!.scheduler.metricsIntervalMs;
  loop.every(PROBE, {
    every: wanted === undefined ? probeBase : Math.min(probeBase, wanted / 1000),
    run: () => run.probe(),
  });
  loop.every(PEER, {
    every: regions && mode.forwarding ? regions.peerProbeS : Infinity,
    run: () => run.peerProbe(),
  });
  loop.every(SYNC, {
    every: mode.sharing === 'shared-view' ? routersCfg!.syncS : Infinity,
    run: () => run.sync(),
  });
  loop.every(SAMPLE, { every: opts.sampleEveryS ?? Math.max(0.05, endS / 400), run: () => run.sample() });
  const cut = loop.run(run);
  return {
    policy: mode.label,
    records: run.records,
    samples: run.samples,
    routerSamples: run.routerSamples,
    backends: loop.fleet.backendStats(),
    simulatedS: cut && run.opens.size > 0 ? endS : loop.lastActivity,
    routers: routers.map((r) => r.stats),
  };
}

/** The routers of a run on the event loop, and what they do with its events. */
class Routers implements LoopHost<Event> {
  readonly loop: EventLoop<Event>;
  readonly routers: Router[];
  readonly drivers: ClientDriver[];
  readonly records: RequestRecord[] = [];
  readonly opens = new Map<string, Open>();
  readonly samples: QueueSample[] = [];
  readonly routerSamples: RouterSample[] = [];
  private readonly routerIndex: Map<string, number>;
  private readonly regions: Scenario['regions'];
  private inTransit = 0;
  private nextRouter = 0;
  /** shared-state: routers with backends whose shared state changed (see afterEvent). */
  private readonly changedRouters = new Set<number>();

  constructor(
    private readonly scenario: Scenario,
    private readonly mode: FederationMode,
    opts: SimulateOptions,
  ) {
    const regions = (this.regions = scenario.regions);
    this.loop = new EventLoop<Event>(scenario.fleet, {
      seed: opts.seed,
      durationS: scenario.durationS,
      endS: scenario.durationS + scenario.graceS,
      lazy: false,
    });
    this.routers = this.createRouters(opts.seed);
    this.routerIndex = new Map(this.routers.map((r, i) => [r.name, i]));
    this.drivers = regions
      ? regions.list.map((r) => r.createDriver(deriveSeed(opts.seed, `region:${r.name}`)))
      : [scenario.createDriver(opts.seed)];
  }

  /** One router per region, or `count` in front of the whole fleet ('single' keeps one). */
  private createRouters(seed: number): Router[] {
    const { scenario, mode, regions } = this;
    const fleet = scenario.fleet;
    const defs: { name: string; engines: number[] }[] = regions
      ? regions.list.map((r) => ({
          name: r.name,
          engines: fleet.flatMap((b, i) => (b.region === r.name ? [i] : [])),
        }))
      : Array.from({ length: mode.sharing === 'single' ? 1 : scenario.routers!.count }, (_, k) => ({
          name: `router-${k}`,
          engines: fleet.map((_b, i) => i),
        }));
    return defs.map((d, k) => {
      const { policy, views } = sharedPolicy(
        createPolicy(mode.local, createRng(deriveSeed(seed, `policy:${d.name}`)), scenario.scheduling, {
          rlWeights: readRlWeights,
        }),
        mode.sharing,
        (s) => this.publish(k, s),
        // The order requests reached the routers (the balancer's): ties of the cross-router queue order.
        (req) => (req as Open).index,
        mode.lagS * 1000,
      );
      const scheduler = routerScheduler(
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
              peers: defs
                .filter((_p, j) => j !== k)
                .map((p) => ({ name: p.name, url: `sim://${p.name}`, region: p.name })),
            })
          : undefined;
      const nowMs = (): number => this.loop.now * 1000;
      return {
        name: d.name,
        scheduler,
        engines: d.engines,
        federation,
        waiting: federation
          ? new QueuedForwards(
              federation,
              () => availableReplicas(scheduler.backendViews(), nowMs()) > 0,
              nowMs,
            )
          : undefined,
        stats: { name: d.name, arrived: 0, forwardedOut: 0, servedForPeers: 0 },
        views,
      };
    });
  }

  private oneWay(a: number, b: number): number {
    return this.regions ? this.regions.oneWayS(this.routers[a]!.name, this.routers[b]!.name) : 0;
  }

  /**
   * Router j pushed or answered: the others apply it `lagS` later (at once for 0). A sequenced
   * push is in the log before any later pick reads it: at once (its request paid the round trip
   * before its pick: send).
   */
  private publish(j: number, pushOrHold: Shared): void {
    // A push of a held request says so (the push ends the hold: shared-state.ts).
    const s =
      pushOrHold.hold === undefined && pushOrHold.report === undefined && (pushOrHold.req as Open).held
        ? { ...pushOrHold, wasHeld: true }
        : pushOrHold;
    const sequencedPush = this.mode.sequenced && s.report === undefined && s.hold === undefined;
    if (this.mode.lagS === 0 || sequencedPush) this.deliver(j, s);
    else this.loop.heap.push(this.loop.now + this.mode.lagS, SHARE, { kind: SHARE, router: j, share: s });
  }

  /** What router j published reaches every other router. */
  private deliver(j: number, s: Shared): void {
    const at = this.loop.now * 1000;
    this.routers.forEach((r, k) => {
      if (k !== j && receiveShared(r.views, r.scheduler, s, at)) this.changedRouters.add(k);
    });
  }

  schedule(driver: number, items: readonly ScheduledRequest[]): void {
    // In a routers scenario the balancer in front spreads requests over the routers in turn.
    this.loop.schedule(items, (it) => ({
      kind: SEND,
      request: it.request,
      router: this.regions ? driver : this.nextRouter++ % this.routers.length,
      driver,
    }));
  }

  private finishToClient(o: Open, t: number, ok: boolean): void {
    this.opens.delete(o.rec.id);
    this.schedule(o.driver, this.drivers[o.driver]!.onFinish(o.rec.id, t, ok, o.answer));
  }

  private apply(r: Router, ds: readonly Decision[]): void {
    const { loop } = this;
    for (const d of ds) {
      // The core hands back the request object it was given: the Open of send.
      const o = d.request as Open;
      r.waiting?.remove(o.rec.id);
      if (o.held) this.unhold(o);
      if (d.type === 'reject') {
        o.rec.ok = false;
        o.rec.failure = d.reason;
        o.rec.finishS = loop.now + o.backS;
        this.finishToClient(o, loop.now + o.backS, false);
        continue;
      }
      const i = loop.fleet.byName.get(d.backend)!;
      loop.submit(o, i, loop.fleet.prepare(o, i, d.backend, loop.now));
    }
  }

  /** `o` leaves router k for `peerName` (already counted by its Federation). */
  private forward(k: number, o: Open, peerName: string): void {
    const p = this.routerIndex.get(peerName)!;
    this.routers[k]!.stats.forwardedOut++;
    o.backS = this.oneWay(k, p);
    this.inTransit++;
    this.loop.heap.push(this.loop.now + o.backS, ARRIVE, { kind: ARRIVE, id: o.rec.id, router: p });
  }

  private submitAt(k: number, o: Open, own: boolean): void {
    const r = this.routers[k]!;
    const nowMs = this.loop.now * 1000;
    o.router = k;
    if (own)
      r.waiting?.add(o, (d) => {
        r.scheduler.cancel(o.rec.id, this.loop.now * 1000);
        this.forward(k, o, d.peer);
        return true;
      });
    this.apply(r, r.scheduler.submit(o, nowMs));
    if (this.mode.sharing === 'shared-state' && o.rec.dispatchS === undefined && o.rec.ok === undefined) {
      o.held = true;
      this.publish(k, { req: o, backend: '', report: undefined, hold: true });
    }
  }

  private unhold(o: Open): void {
    o.held = false;
    this.publish(o.router, { req: o, backend: '', report: undefined, hold: false });
  }

  send(req: WorkloadRequest, k: number, driver: number): void {
    const now = this.loop.now;
    const o: Open = Object.assign(openRequest(req, now, this.records.length), {
      driver,
      origin: k,
      router: k,
      backS: 0,
      held: false,
    });
    this.records.push(o.rec);
    this.opens.set(req.id, o);
    if (req.timeoutS !== undefined && now + req.timeoutS <= this.loop.endS) {
      this.loop.heap.push(now + req.timeoutS, TIMEOUT, { kind: TIMEOUT, id: req.id });
    }
    const r = this.routers[k]!;
    r.stats.arrived++;
    if (this.mode.sequenced && this.mode.lagS > 0) {
      // One round trip to the log before the pick: the router picks on every push made until then.
      this.inTransit++;
      this.loop.heap.push(now + this.mode.lagS, ARRIVE, { kind: ARRIVE, id: req.id, router: k, own: true });
      return;
    }
    if (r.federation && r.waiting!.size === 0) {
      const d = r.federation.route(o, false, this.localAvailable(r), now * 1000);
      if (d.kind === 'peer') {
        r.federation.onForwarded(o, d.peer);
        this.forward(k, o, d.peer);
        return;
      }
    }
    this.submitAt(k, o, true);
    // Forward the oldest of this router's own waiting requests while no local replica is available
    // and a peer is (Algorithm 1 at the head of the FCFS queue; src/federation/queue-forward.ts).
    r.waiting?.drain();
  }

  private localAvailable(r: Router): boolean {
    return availableReplicas(r.scheduler.backendViews(), this.loop.now * 1000) > 0;
  }

  /** The cursor is not used here: every opening request is a SEND on the heap. */
  open(): void {
    throw new Error('simulateFederation: no opening cursor');
  }

  handle(ev: Event): void {
    switch (ev.kind) {
      case SEND:
        return this.send(ev.request!, ev.router!, ev.driver!);
      case ARRIVE:
        return this.arrive(ev.id!, ev.router!, ev.own === true);
      case TIMEOUT:
        return this.timeout(ev.id!);
      case PEER: {
        const r = this.routers[ev.router!]!;
        r.federation!.setStatus(this.routers[ev.peer!]!.name, ev.status!, this.loop.now * 1000);
        r.waiting?.drain();
        return;
      }
      default:
        this.deliver(ev.router!, ev.share!);
    }
  }

  /** A request forwarded to router k reaches it, or (`own`) k's own is back from the log. */
  private arrive(id: string, k: number, own: boolean): void {
    this.inTransit--;
    const o = this.opens.get(id);
    if (!o) return; // the client gave up meanwhile
    if (own) return this.submitAt(k, o, true);
    this.routers[k]!.stats.servedForPeers++;
    // Hop marker: a forwarded request is scheduled here and never forwarded again.
    this.submitAt(k, o, false);
  }

  finished(i: number, e: Finished): void {
    const o = this.opens.get(e.id)!;
    const report = newReport();
    settleFinished(o.rec, e, o.backS, report);
    this.loop.fleet.outstanding[i]!--;
    const r = this.routers[o.router]!;
    const ds = r.scheduler.complete(e.id, report, e.t * 1000);
    if (o.router !== o.origin) this.routers[o.origin]!.federation?.onDone(r.name, true, this.loop.now * 1000);
    this.finishToClient(o, o.rec.finishS!, true);
    this.apply(r, ds);
  }

  private timeout(id: string): void {
    const o = this.opens.get(id);
    if (!o) return;
    const now = this.loop.now;
    const r = this.routers[o.router]!;
    r.waiting?.remove(id);
    if (o.held) this.unhold(o);
    const { decisions } = r.scheduler.cancel(id, now * 1000);
    if (o.engine >= 0) this.loop.cancel(o);
    o.rec.ok = false;
    o.rec.failure = 'client-timeout';
    o.rec.finishS = now;
    this.finishToClient(o, now, false);
    this.apply(r, decisions);
  }

  busy(): boolean {
    return (
      this.inTransit > 0 ||
      this.routers.some((r) => r.scheduler.inFlightTotal > 0 || r.scheduler.queueLength > 0)
    );
  }

  /** A hold on load is asked again only when a backend changes: the shared state is its load. */
  readonly afterEvent = (): void => {
    const { changedRouters } = this;
    while (changedRouters.size > 0) {
      const [k] = changedRouters;
      changedRouters.delete(k!);
      const r = this.routers[k!]!;
      const names = [...r.views.changed];
      r.views.changed.clear();
      for (const n of names) this.apply(r, r.scheduler.updateBackend(n, {}, this.loop.now * 1000));
    }
  };

  probe(): void {
    const { loop, routers } = this;
    for (const r of routers) {
      for (const i of r.engines)
        r.scheduler.setMetrics(loop.fleet.specs[i]!.name, loop.fleet.metricsOf(i, loop.now, false));
      // The scrape counts what every router pushed before it.
      r.views.since.clear();
    }
    for (const r of routers) {
      this.apply(r, r.scheduler.pump(loop.now * 1000));
      r.waiting?.drain();
    }
  }

  /** Every router with forwarding sends each peer its status, one one-way latency away. */
  peerProbe(): void {
    const now = this.loop.now;
    this.routers.forEach((r, k) => {
      if (!r.federation) return;
      this.routers.forEach((p, j) => {
        if (j === k) return;
        const status: PeerStatus = {
          region: p.name,
          availableReplicas: availableReplicas(p.scheduler.backendViews(), now * 1000, this.mode.lendKvBelow),
          queueLength: p.scheduler.queueLength,
        };
        this.loop.heap.push(now + this.oneWay(j, k), PEER, { kind: PEER, router: k, peer: j, status });
      });
    });
  }

  /** What each router would read back from Redis: every other router's in-flight per backend. */
  sync(): void {
    const counts = this.routers.map((r) =>
      r.scheduler.backendViews().map((b) => [b.name, b.inFlight] as const),
    );
    this.routers.forEach((r, k) => {
      const changed = syncOthers(
        r.views,
        counts.map((c, j) => (j === k ? undefined : c)),
      );
      // A hold on load is asked again only when a backend changes: the others' counts are its load.
      for (const n of changed) this.apply(r, r.scheduler.updateBackend(n, {}, this.loop.now * 1000));
    });
  }

  sample(): void {
    this.loop.fleet.sample(this.loop.now, this.samples);
    let queued = 0;
    for (const r of this.routers) queued += r.scheduler.queueLength;
    this.routerSamples.push({ t: this.loop.now, queued });
  }
}
