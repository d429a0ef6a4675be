/**
 * The request ledger (issue #31: one simulator): what a run records per request, how a sent
 * request becomes one open entry (record + the core's RequestInfo), how an engine's finish fills
 * the record in, and the conservation check at the end. Shared by every router node of a run.
 */
import type { CompletionReport, RejectReason } from '../core/types.js';
import type { EngineEvent } from '../engine/types.js';
import { flattenMessages } from '../engine/tokens.js';
import type { WorkloadRequest } from '../workloads/types.js';
import type { OpenRequest, QueueSample } from './engine-fleet.js';

/** Why a request failed: the router rejected it, or the client gave up (WorkloadRequest.timeoutS). */
export type FailureReason = RejectReason | 'client-timeout';

/** What happened to one request, in seconds of virtual time from the start of the run. */
export interface RequestRecord {
  readonly id: string;
  readonly label: string | undefined;
  readonly arrivalS: number;
  dispatchS: number | undefined;
  firstTokenS: number | undefined;
  /** Completion time; for a failed request, when it failed. */
  finishS: number | undefined;
  backend: string | undefined;
  /** true: answered in full; false: failed (see `failure`); undefined: unfinished when the run ended. */
  ok: boolean | undefined;
  failure: FailureReason | undefined;
  promptTokens: number;
  outputTokens: number;
  /** Prompt tokens served from the engine's prefix cache. */
  cachedTokens: number;
}

/** One sample of the routers' own queues (requests held, not pushed anywhere yet), summed. */
export interface RouterSample {
  readonly t: number;
  readonly queued: number;
}

export interface RunResult {
  readonly policy: string;
  /** In arrival order. */
  readonly records: readonly RequestRecord[];
  readonly samples: readonly QueueSample[];
  readonly routerSamples: readonly RouterSample[];
  readonly backends: readonly { name: string; prefixQueries: number; prefixHits: number }[];
  /**
   * Virtual seconds the run covered: to its last arrival or engine event, or to durationS + graceS
   * when it was cut off with work left. What the speed-up is measured against.
   */
  readonly simulatedS: number;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** The ledger's entry for `req`, sent at `now` (s), the `index`-th of the run. */
export function openRequest(req: WorkloadRequest, now: number, index: number): OpenRequest {
  const rec: RequestRecord = {
    id: req.id,
    label: req.label,
    arrivalS: now,
    dispatchS: undefined,
    firstTokenS: undefined,
    finishS: undefined,
    backend: undefined,
    ok: undefined,
    failure: undefined,
    promptTokens: 0,
    outputTokens: 0,
    cachedTokens: 0,
  };
  return {
    id: req.id,
    model: req.model,
    api: req.api.startsWith('ollama') ? 'ollama' : 'openai',
    arrivedAt: now * 1000,
    promptText: req.messages ? flattenMessages(req.messages) : (req.prompt ?? ''),
    maxTokens: req.maxTokens,
    sessionKey: req.sessionKey,
    taskHint: req.taskHint,
    req,
    rec,
    index,
    engine: -1,
    answer: '',
  };
}

export function newReport(): Mutable<CompletionReport> {
  return {
    ok: true,
    dispatchedAt: 0,
    firstByteAt: 0,
    finishedAt: 0,
    promptTokens: 0,
    completionTokens: 0,
    promptEvalMs: 0,
    evalMs: 0,
    cachedTokens: 0,
  };
}

type Finished = Extract<EngineEvent, { type: 'finished' }>;

/**
 * Fill in `rec` from its engine's finish `e` (answers reach the client `backS` later) and `report`
 * as a live Ollama backend would report it: engine-measured prefill and decode durations.
 */
export function settleFinished(
  rec: RequestRecord,
  e: Finished,
  backS: number,
  report: Mutable<CompletionReport>,
): void {
  const dispatchS = rec.dispatchS!;
  const firstAtEngine = dispatchS + e.queuedS + e.prefillS;
  rec.firstTokenS = firstAtEngine + backS;
  rec.finishS = e.t + backS;
  rec.ok = true;
  rec.outputTokens = e.outputTokens;
  rec.cachedTokens = e.cachedTokens;
  report.dispatchedAt = dispatchS * 1000;
  report.firstByteAt = firstAtEngine * 1000;
  report.finishedAt = e.t * 1000;
  report.promptTokens = e.promptTokens;
  report.completionTokens = e.outputTokens;
  report.promptEvalMs = e.prefillS * 1000;
  report.evalMs = e.decodeS * 1000;
  report.cachedTokens = e.cachedTokens;
}

/**
 * Every request sent is completed, failed, or still open at the end — none vanishes — and the open
 * ones are exactly those the routers still hold (queued, in flight, or `inTransit` between them)
 * and the engines still hold.
 */
export function checkConservation(
  records: readonly RequestRecord[],
  openCount: number,
  core: { inFlight: number; queued: number; inTransit: number },
  inEngines: number,
): void {
  let completed = 0;
  let failed = 0;
  let unfinished = 0;
  let dispatchedOpen = 0;
  for (const r of records) {
    if (r.ok === true) completed++;
    else if (r.ok === false) failed++;
    else {
      unfinished++;
      if (r.dispatchS !== undefined) dispatchedOpen++;
    }
  }
  const held = core.inFlight + core.queued + core.inTransit;
  if (
    completed + failed + unfinished !== records.length ||
    unfinished !== openCount ||
    unfinished !== held ||
    dispatchedOpen !== core.inFlight ||
    dispatchedOpen !== inEngines
  ) {
    throw new Error(
      `simulator lost requests: sent ${records.length} = ${completed} completed + ${failed} failed + ` +
        `${unfinished} unfinished; routers hold ${held}, engines ${inEngines}, dispatched open ${dispatchedOpen}`,
    );
  }
}
