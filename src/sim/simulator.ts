import { createPolicy, type PolicySpec } from '../core/policies/index.js';
import { flattenMessages } from '../core/prompt.js';
import { createRng, deriveSeed } from '../core/rng.js';
import { Scheduler } from '../core/scheduler.js';
import type { Decision, Policy, RequestInfo } from '../core/types.js';
import { EngineModel } from '../engine/model.js';
import { countTokens, promptBlockHashes } from '../engine/tokens.js';
import type { Scenario } from '../scenario/types.js';
import type { ScheduledRequest, WorkloadRequest } from '../workloads/types.js';
import { EventHeap } from './event-heap.js';

/** What happened to one request, in seconds of virtual time from the start of the run. */
export interface RequestRecord {
  readonly id: string;
  readonly label: string | undefined;
  readonly arrivalS: number;
  dispatchS: number | undefined;
  firstTokenS: number | undefined;
  finishS: number | undefined;
  backend: string | undefined;
  /** true: answered in full; false: rejected by the router; undefined: unfinished when the run ended. */
  ok: boolean | undefined;
  promptTokens: number;
  outputTokens: number;
}

/** One sample of a backend's queues. */
export interface QueueSample {
  readonly t: number;
  readonly backend: string;
  /** Requests pushed and not finished (engine running + waiting). */
  readonly outstanding: number;
  /** Waiting inside the engine (not yet admitted). */
  readonly engineWaiting: number;
}

export interface RunResult {
  readonly policy: string;
  readonly records: readonly RequestRecord[];
  readonly samples: readonly QueueSample[];
  readonly backends: readonly { name: string; prefixQueries: number; prefixHits: number }[];
  /** Virtual seconds simulated. */
  readonly simulatedS: number;
}

export interface SimulateOptions {
  readonly seed: number;
  /** Queue-length sampling period for charts, virtual seconds (default: run length / 400). */
  readonly sampleEveryS?: number;
  /** How often the engines' load is reported to the core (a metrics probe), virtual seconds. */
  readonly probeEveryS?: number;
}

const SEND = 0;
const ENGINE = 1;
const PROBE = 2;
const SAMPLE = 3;

interface Event {
  kind: number;
  /** SEND: the request; ENGINE: backend index; others unused. */
  request?: WorkloadRequest;
  backend?: number;
  /** ENGINE: the wake's version; stale wakes are skipped. */
  version?: number;
}

/**
 * The discrete-event simulator: the exact scheduling core and policies the router runs, the exact
 * engine model the emulated engine runs, a virtual clock. Deterministic for a seed.
 */
export function simulate(scenario: Scenario, policySpec: PolicySpec, opts: SimulateOptions): RunResult {
  const policy = createPolicy(policySpec, createRng(deriveSeed(opts.seed, 'policy')));
  return simulateWith(scenario, policy, policyLabel(policySpec), opts);
}

/** Run with a policy object (the oracle passes fixed assignments). */
export function simulateWith(scenario: Scenario, policy: Policy, label: string, opts: SimulateOptions): RunResult {
  const scheduler = new Scheduler({ policy });
  const fleet = scenario.fleet;
  const engines = fleet.map((b) => new EngineModel(b.profile, { tokenEvents: false }));
  const byName = new Map(fleet.map((b, i) => [b.name, i]));
  for (const b of fleet) {
    scheduler.addBackend({
      name: b.name,
      api: 'ollama',
      models: b.models,
      maxConcurrency: b.maxConcurrency,
      weight: b.weight,
      region: b.region,
    });
  }
  const driver = scenario.createDriver(opts.seed);
  const endS = scenario.durationS + scenario.graceS;
  const heap = new EventHeap<Event>();
  const records = new Map<string, RequestRecord>();
  const infos = new Map<string, RequestInfo>();
  const texts = new Map<string, string>();
  const wakeAt: (number | undefined)[] = engines.map(() => undefined);
  const version: number[] = engines.map(() => 0);
  const outstanding: number[] = engines.map(() => 0);
  const samples: QueueSample[] = [];
  let now = 0;

  const schedule = (items: readonly ScheduledRequest[]): void => {
    for (const it of items) {
      if (it.at < scenario.durationS) heap.push(Math.max(it.at, now), { kind: SEND, request: it.request });
    }
  };

  /** Keep one live wake per engine at its next iteration end. */
  const rearm = (i: number): void => {
    const t = engines[i]!.nextEventTime();
    if (t === wakeAt[i]) return;
    wakeAt[i] = t;
    version[i]!++;
    if (t !== undefined) heap.push(t, { kind: ENGINE, backend: i, version: version[i]! });
  };

  const apply = (ds: readonly Decision[]): void => {
    for (const d of ds) {
      const rec = records.get(d.request.id)!;
      if (d.type === 'reject') {
        rec.ok = false;
        rec.finishS = now;
        schedule(driver.onFinish(rec.id, now, false, ''));
        continue;
      }
      const i = byName.get(d.backend)!;
      const req = reqOf.get(d.request.id)!;
      const text = texts.get(d.request.id)!;
      const promptTokens = countTokens(text);
      const cap = req.maxTokens;
      const outputTokens = Math.max(1, cap !== undefined ? Math.min(req.outputTokens, cap) : req.outputTokens);
      rec.dispatchS = now;
      rec.backend = d.backend;
      rec.promptTokens = promptTokens;
      outstanding[i]!++;
      engines[i]!.submit(
        {
          id: d.request.id,
          promptTokens,
          blockHashes: promptBlockHashes(text, fleet[i]!.profile.blockSize),
          outputTokens,
        },
        now,
      );
      rearm(i);
    }
  };
  const reqOf = new Map<string, WorkloadRequest>();

  const onSend = (req: WorkloadRequest): void => {
    const text = req.messages ? flattenMessages(req.messages) : (req.prompt ?? '');
    records.set(req.id, {
      id: req.id,
      label: req.label,
      arrivalS: now,
      dispatchS: undefined,
      firstTokenS: undefined,
      finishS: undefined,
      backend: undefined,
      ok: undefined,
      promptTokens: 0,
      outputTokens: 0,
    });
    reqOf.set(req.id, req);
    texts.set(req.id, text);
    const info: RequestInfo = {
      id: req.id,
      model: req.model,
      api: req.api.startsWith('ollama') ? 'ollama' : 'openai',
      arrivedAt: now * 1000,
      promptText: text,
      maxTokens: req.maxTokens,
      sessionKey: req.sessionKey,
    };
    infos.set(req.id, info);
    apply(scheduler.submit(info, now * 1000));
  };

  const onEngine = (i: number): void => {
    wakeAt[i] = undefined;
    const events = engines[i]!.advance(now);
    for (const e of events) {
      if (e.type !== 'finished') continue;
      const rec = records.get(e.id)!;
      const dispatchS = rec.dispatchS!;
      rec.firstTokenS = dispatchS + e.queuedS + e.prefillS;
      rec.finishS = e.t;
      rec.ok = true;
      rec.outputTokens = e.outputTokens;
      outstanding[i]!--;
      texts.delete(e.id);
      reqOf.delete(e.id);
      infos.delete(e.id);
      // Reported as a live Ollama backend would: engine-measured prefill and decode durations.
      const ds = scheduler.complete(
        e.id,
        {
          ok: true,
          dispatchedAt: dispatchS * 1000,
          firstByteAt: rec.firstTokenS * 1000,
          finishedAt: e.t * 1000,
          promptTokens: e.promptTokens,
          completionTokens: e.outputTokens,
          promptEvalMs: e.prefillS * 1000,
          evalMs: e.decodeS * 1000,
        },
        e.t * 1000,
      );
      apply(ds);
      // Closed-loop clients answer with the generated text's size; its content does not matter here.
      schedule(driver.onFinish(e.id, e.t, true, ''));
    }
    rearm(i);
  };

  const probeEvery = opts.probeEveryS ?? 0.05;
  const sampleEvery = opts.sampleEveryS ?? Math.max(0.05, endS / 400);
  const onProbe = (): void => {
    for (let i = 0; i < engines.length; i++) {
      const s = engines[i]!.stats();
      scheduler.setMetrics(fleet[i]!.name, { running: s.running, waiting: s.waiting, kvUsage: s.kvUsage, at: now * 1000 });
    }
    apply(scheduler.pump(now * 1000));
  };
  const onSample = (): void => {
    for (let i = 0; i < engines.length; i++) {
      samples.push({ t: now, backend: fleet[i]!.name, outstanding: outstanding[i]!, engineWaiting: engines[i]!.stats().waiting });
    }
  };

  schedule(driver.start());
  heap.push(0, { kind: PROBE });
  heap.push(0, { kind: SAMPLE });
  while (heap.size > 0) {
    const t = heap.peekTime()!;
    if (t > endS) break;
    const ev = heap.pop()!;
    now = t;
    if (ev.kind === SEND) onSend(ev.request!);
    else if (ev.kind === ENGINE) {
      if (ev.version === version[ev.backend!]) onEngine(ev.backend!);
    } else if (ev.kind === PROBE) {
      onProbe();
      // Probes only matter while something is queued or running; stop when the run is idle.
      if (heap.size > 0 || scheduler.inFlightTotal > 0) heap.push(now + probeEvery, { kind: PROBE });
    } else {
      onSample();
      if (heap.size > 0 || scheduler.inFlightTotal > 0) heap.push(now + sampleEvery, { kind: SAMPLE });
    }
  }

  const out = [...records.values()];
  // Conservation: every request sent is completed, rejected, or still open at the end — none vanishes.
  const open = out.filter((r) => r.ok === undefined).length;
  if (open !== scheduler.inFlightTotal + scheduler.queueLength) {
    throw new Error(`simulator lost requests: ${open} open vs ${scheduler.inFlightTotal + scheduler.queueLength} in the core`);
  }
  return {
    policy: label,
    records: out,
    samples,
    backends: fleet.map((b, i) => {
      const s = engines[i]!.stats();
      return { name: b.name, prefixQueries: s.prefixCacheQueries, prefixHits: s.prefixCacheHits };
    }),
    simulatedS: Math.min(now, endS),
  };
}

/** A policy's name as reports show it: parameters appended when given. */
export function policyLabel(spec: PolicySpec): string {
  const params = spec.params ?? {};
  const keys = Object.keys(params);
  return keys.length === 0 ? spec.name : `${spec.name}(${keys.map((k) => `${k}=${JSON.stringify(params[k])}`).join(',')})`;
}
