import { z } from 'zod';
import { Ema } from '../estimators/guard.js';
import { LinearFit } from '../estimators/linear-fit.js';
import { OutputLengthPredictor } from '../estimators/output-length.js';
import { OutputLengthModel } from '../estimators/output-length-model.js';
import { splitWall, WallRegression } from '../estimators/wall-split.js';
import type { BackendView, CompletionReport, Policy, PolicyContext, RequestInfo } from '../types.js';
import { parseParams } from './params.js';
import { PrefixCredit } from './prefix-credit.js';

/**
 * Our estimated-wait router (the default). For each candidate it predicts when *this* request
 * would finish there, and picks the earliest. It fixes what OllamaRouter's estimate gets wrong, and
 * models a continuous-batching engine (issue #20, docs/results.md):
 *
 * - Rates come from the engine's own durations (Ollama prompt_eval_duration / eval_duration), so
 *   queueing inside the engine does not inflate "time per token"; prefill and decode are
 *   separate (a long prompt and a long answer cost differently).
 * - A batching engine's decode step slows with every sequence in the batch. Each backend's time
 *   per output token is fitted against the batch it was measured in (the router's in-flight count
 *   averaged over the request's life), and a new request is costed at the batch it would join
 *   (in flight + 1). So load shows in the estimate before any queue forms, and a rate measured
 *   under a heavy batch is not taken for a slow backend (the feedback loop an EMA of raw rates
 *   had: a backend that looked fast got work, then looked slow, …).
 * - Prefill time is fitted against prompt length (its intercept is the decode step the prefill
 *   shares with the batch).
 * - A request waits for a slot only when the engine is full: at its learned slot count (a lower
 *   bound raised by requests that did not queue, an upper one set by requests that did), or when
 *   its probed metrics show requests waiting. A backend seen batching with no limit seen is not
 *   charged a queue at all. When full, the in-flight requests are replayed FIFO over the slots.
 * - Output length is predicted per model and prompt-length bucket (online), capped by the
 *   client's max tokens; answers cut at that cap are censored observations (they weigh the cap in),
 *   and requests in flight are re-predicted as the predictor learns. `outputLength: learned` asks the
 *   text-aware OutputLengthModel instead, once per request (opt-in: mixed-4x −11 %, a few skylb
 *   scenarios 1–3 % worse; docs/results.md).
 * - Late binding: engines admit FIFO, so a request pushed into an engine that already queues
 *   requests inside commits every later one there to wait behind it. A request that every engine
 *   would queue behind another waits in the router instead, and held requests take the room that
 *   frees in response-ratio order (HRRN: (waited + predicted service) / predicted service), so
 *   short requests are not stuck behind long ones and no request starves (issue #20,
 *   heimdall-burst: +34 % → −24 % vs least-connections).
 * - A pick is priced at its marginal cost to the fleet: its own finish plus the delay it adds to
 *   the requests it runs beside (its prefill stalls their batch, its sequence slows every decode
 *   step), also on a full engine, where it adds them once admitted. Without it each request picks
 *   the fast replica of an unequal fleet whose batch it then slows for everyone.
 * - Prefix credit: a backend this router recently sent the same prompt prefix (a conversation's
 *   earlier turns, a shared document) likely holds it in its prefix cache, and is charged prefill
 *   only for the rest (prefix-credit.ts: per backend, an LRU of the prompt chunks sent there).
 * - Estimates within `tieTolerance` of the best are ties (their difference is below the noise of
 *   the fits): the one with fewer in flight wins, then an unmeasured one, then round-robin order.
 *   Identical replicas then split load evenly rather than by their fits' noise.
 * - No winner-takes-all: a backend with no samples, or whose samples went stale while it sat
 *   idle, is costed with the fleet's best fits, so it is tried (re-measured) when idle.
 */
const Params = z.strictObject({
  /** Forgetting rate of the fitted rates (weight each new sample takes). */
  alpha: z.number().gt(0).lte(1).default(0.05),
  /** Output length assumed before any answer for a model was seen. */
  defaultOutputTokens: z.number().int().positive().default(128),
  /** Sequences a backend is assumed to run at once until learned (or its maxConcurrency, if lower). */
  defaultSlots: z.number().int().positive().default(1),
  /**
   * An idle backend that has not been sampled for this many routing decisions is costed
   * optimistically, so it is re-measured. Counted in decisions, not time, so the policy behaves
   * the same at any traffic rate and under a time-scaled bench.
   */
  exploreAfterDecisions: z.number().int().positive().default(8),
  /** Prompt tokens per character before any answer reported a count. */
  initialTokensPerChar: z.number().gt(0).max(10).default(0.25),
  /** Seconds per prompt / output token assumed when no backend has a sample yet. */
  priorPrefillS: z.number().positive().default(0.001),
  priorDecodeS: z.number().positive().default(0.05),
  /** Relative difference of estimates below which two backends always count as tied. */
  tieTolerance: z.number().nonnegative().lt(1).default(0.03),
  /**
   * Estimates closer than this many standard errors of their fits also tie: a difference the
   * fits cannot tell from noise is no reason to load one backend more.
   */
  tieStdErrors: z.number().nonnegative().default(2),
  /**
   * Weight of the delay this request adds to the others it runs beside (its prefill stalls their
   * batch, its sequence slows their decode steps). 1 prices a pick at its marginal cost to the
   * fleet's total latency, not only its own finish (issue #20: a fast replica's full batch looked
   * cheapest to each request; 0 is the selfish pick).
   */
  othersWeight: z.number().nonnegative().default(1),
  /**
   * Prefix credit (issue #20, skylb-multiturn-12): share of the prompt prefix a backend likely
   * holds in its prefix cache (what this router sent it, prefix-credit.ts) that is not charged as
   * prefill there — in its own finish and in the stall it adds to the others. 0: every backend
   * is charged the whole prompt. On (1) by default: it changed no result where prompts share no
   * prefix, and helped every skylb scenario (docs/results.md).
   */
  prefixCredit: z.number().min(0).max(1).default(1),
  /** Prompt chunks (64 characters, one 16-token block) remembered per backend for the credit. */
  prefixCacheChunks: z.number().int().positive().default(4096),
  /**
   * Late binding (issue #20, heimdall-burst): a request is not pushed into an engine that would
   * queue it behind requests already waiting inside (engines admit FIFO): it waits in the router
   * until an engine has room, and the waiting request with the highest response ratio
   * ((waited + service) / service, HRRN) goes first, so a short request is not stuck behind long
   * ones committed to every engine's queue. Engine metrics say what waits inside; without them,
   * what is in flight beyond the sequences the engine is known to run at once.
   */
  lateBinding: z.boolean().default(true),
  /** Order of the requests held by late binding: response ratio (HRRN), or arrival (FIFO). */
  heldOrder: z.enum(['ratio', 'fifo']).default('ratio'),
  /**
   * Output-length prediction: `prior`, an EMA per model and prompt-length bucket (re-predicted
   * as it learns); `learned`, the online softmax predictor over the prompt's text and task hint
   * (OutputLengthModel, issue #17 item 3), asked once per request.
   */
  outputLength: z.enum(['prior', 'learned']).default('prior'),
});

interface Flight {
  readonly dispatchedAt: number;
  readonly promptTokens: number;
  /** Prompt tokens it was expected to prefill there (the rest credited as cached: prefixCredit). */
  readonly prefillTokens: number;
  /** Prompt tokens in the prefix the backend likely held cached when it was pushed (0: none). */
  readonly cachedTokens: number;
  readonly model: string;
  readonly maxTokens: number | undefined;
  /** Predicted output tokens, as of predictor version `ver` (re-predicted when it has learned). */
  expectedOut: number;
  /** The prediction when it was pushed (what the calibration of predictions learns from). */
  readonly predictedAtPush: number;
  ver: number;
  /** Requests in flight on the backend when this one was pushed (itself excluded). */
  readonly ahead: number;
  /** The backend's in-flight area (request·ms) when this one was pushed. */
  readonly area0: number;
}

interface Backend {
  readonly name: string;
  /** Prefill seconds (first-token time in the engine) against prompt tokens. */
  readonly prefill: LinearFit;
  /** Seconds per output token against the batch it ran in. */
  readonly decode: LinearFit;
  /** Rates from whole (non-streamed, wall-time only) answers, when they tell prefill from decode. */
  readonly wall: WallRegression;
  /** Learned lower bound on sequences run at once. */
  slots: number;
  /** Lowest in-flight count at which a pushed request queued in the engine (Infinity: never seen). */
  queuedAt: number;
  lastSampleAt: number | undefined;
  /** Routing decision count when it last produced a sample. */
  lastSampleDecision: number;
  /** ∫ in-flight dt (request·ms), for each request's mean batch. */
  area: number;
  areaAt: number;
  /** In dispatch order (an array: every estimate walks it, for each candidate of each decision). */
  readonly flights: Flight[];
  /** The same flights by request id. */
  readonly flightById: Map<string, Flight>;
  /** Bumped whenever `flights` changes (FlightsLoad). */
  flightsVersion: number;
  /** What its flights add to a request's estimate, kept for the next one (FlightsLoad). */
  readonly load: FlightsLoad;
}

/** Fitted cost of a backend: prefill seconds for a prompt, seconds per output token in a batch. */
interface Cost {
  readonly prefill: LinearFit;
  readonly decode: LinearFit;
}

/** The policy, plus its per-candidate estimates for estimated-wait-scorer. */
export interface EstimatedWaitPolicy extends Policy {
  /** Writes, per candidate, the seconds from `now` until this request would finish there; counts a decision. */
  estimates(req: RequestInfo, candidates: readonly BackendView[], now: number, out: Float64Array): void;
}

export function estimatedWait(ctx: PolicyContext): EstimatedWaitPolicy {
  const p = parseParams(Params, ctx.params, 'estimated-wait');
  const backends = new Map<string, Backend>();
  const tokensPerChar = new Ema(0.1);
  const output = new OutputLengthPredictor(p.defaultOutputTokens);
  const model = p.outputLength === 'learned' ? new OutputLengthModel() : undefined;
  /** Learned predictions per request id, made once (bounded: requests that never finish). */
  const learnedOut = new Map<string, number>();
  let cursor = 0;
  let lastNow = 0;
  let decisions = 0;
  let scratch = new Float64Array(8);
  /** Per candidate of the current pick: 1 where it may be pushed now (late binding). */
  let open = new Uint8Array(8);
  let lastCount = 0;
  /** Completions learned from (token ratio, predictor, calibration, fits). */
  let learned = 0;
  /** Bumped by each completion learned from, before it changes any fit or the predictor (FlightsLoad). */
  let fitsVersion = 0;
  /** Bumped by each completion learned from and each backend removed: all a request's size depends on. */
  let sizeStamp = 0;
  /**
   * The last size computed per prompt length (below SIZE_MEMO tokens), with what it was computed
   * for: `sizeStamp` then, the model and the output cap (0: none). Valid while those match.
   */
  let sizeMemo: SizeMemo | undefined;
  /**
   * Version of the HRRN sizes (Policy.responseRatio): bumped when the learning has grown by a
   * sixteenth since the last bump (at least every 64 completions) and when a backend leaves.
   * Sizing every waiting request again at each completion cost more than the rest of the
   * simulation (issue #18); sizes from an untrained predictor are still replaced early (every
   * completion up to 16). Refreshing every 4th-of-growth instead cost heimdall-burst 1–6 %.
   */
  let sizeEpoch = 0;
  let resizeAt = 1;
  /** Whether the last pick held its request because no candidate had room (Policy.heldByLoad). */
  let heldOnLoad = false;
  /**
   * Answer lengths against what was predicted for them: the response-ratio order trusts predicted
   * sizes only as far as they have told answers apart (a slope near 0 — lengths the router cannot
   * foresee — orders held requests by arrival; the performance-aware router's task mix from prompt length alone).
   */
  const calibration = new LinearFit({ alpha: 0.02, minSpread: 8 });
  const credit =
    p.prefixCredit > 0
      ? new PrefixCredit({
          chunkChars: 64,
          capacityChunks: p.prefixCacheChunks,
          maxPrefixChars: 32_768,
        })
      : undefined;
  /** Per candidate of the last estimates: the prompt tokens to prefill there (prefix credit applied). */
  let uncached = new Float64Array(8);
  /**
   * Per candidate of the current decision, found once: its state, the fits it is costed at
   * (costOf), the sequences it runs at once (slotsOf), the prompt tokens it likely holds cached.
   */
  const candState: Backend[] = [];
  const candCost: Cost[] = [];
  let candSlots = new Float64Array(8);
  let candCached = new Float64Array(8);
  const growCandidates = (n: number): void => {
    candState.length = n;
    candCost.length = n;
    if (candSlots.length < n) {
      candSlots = new Float64Array(n * 2);
      candCached = new Float64Array(n * 2);
      uncached = new Float64Array(n * 2);
    }
  };
  /**
   * The last pick, for its dispatch (which comes right after it): the request, where it went, and
   * what was found for it there — not looked up twice while nothing was learned in between.
   */
  let picked: RequestInfo | undefined;
  let pickedView: BackendView | undefined;
  let pickedFits = -1;
  let pickedPromptTokens = 0;
  let pickedPredicted = 0;
  let pickedCached = 0;

  /** `backends` in the same (insertion) order, for the loops that run per decision. */
  const backendList: Backend[] = [];
  /** Per BackendView.index, its state (a lookup by name cost more than the rest of a candidate's check). */
  const byIndex: (Backend | undefined)[] = [];

  const state = (name: string): Backend => {
    let b = backends.get(name);
    if (!b) {
      b = {
        name,
        // Prompt lengths spread widely in real traffic; a spread of 8 tokens is enough to fit.
        prefill: new LinearFit({ alpha: p.alpha, minSpread: 8, throughOrigin: true }),
        // Batch sizes: half a request of spread before a slope is believed.
        decode: new LinearFit({ alpha: p.alpha, minSpread: 0.5 }),
        wall: new WallRegression(p.alpha),
        slots: 1,
        queuedAt: Infinity,
        lastSampleAt: undefined,
        lastSampleDecision: 0,
        area: 0,
        areaAt: 0,
        flights: [],
        flightById: new Map(),
        flightsVersion: 0,
        load: {
          flightsVersion: -1,
          fitsVersion: -1,
          now: NaN,
          cost: undefined,
          slots: NaN,
          hasWait: false,
          wait: 0,
          hasRemaining: false,
          remaining: new Float64Array(8),
        },
      };
      backends.set(name, b);
      backendList.push(b);
    }
    return b;
  };
  const stateOf = (view: BackendView): Backend => {
    const i = view.index;
    const b = byIndex[i];
    if (b !== undefined && b.name === view.name) return b;
    const s = state(view.name);
    if (Number.isInteger(i) && i >= 0 && i < 65_536) byIndex[i] = s;
    return s;
  };
  const promptTokensOf = (req: RequestInfo): number =>
    Math.max(1, Math.round(req.promptText.length * (tokensPerChar.value ?? p.initialTokensPerChar)));

  /**
   * A flight's predicted output, re-predicted once the predictor has learned since: requests pushed
   * before any answer was seen would otherwise keep the default (128 tokens) for their whole life.
   */
  const expectedOf = (f: Flight): number => {
    if (model === undefined && f.ver !== output.version) {
      f.expectedOut = output.predict(f.model, f.promptTokens, f.maxTokens);
      f.ver = output.version;
    }
    return f.expectedOut;
  };

  /** Predicted output tokens of a request (the learned predictor: once per request). */
  const predictOf = (req: RequestInfo, promptTokens: number): number => {
    if (model === undefined) return output.predict(req.model, promptTokens, req.maxTokens);
    let v = learnedOut.get(req.id);
    if (v === undefined) {
      v = model.predict({
        model: req.model,
        promptTokens,
        maxTokens: req.maxTokens,
        text: req.promptText,
        hint: req.taskHint,
      }).expectedTokens;
      if (learnedOut.size >= 65536) learnedOut.clear();
      learnedOut.set(req.id, v);
    }
    return v;
  };

  /** A request's prompt chunk keys for the credit (none: no credit, or no backend holds any of it). */
  const keysOf = (req: RequestInfo): Float64Array | undefined =>
    credit === undefined || req.promptText.length === 0 ? undefined : credit.keysOf(req.id, req.promptText);
  /** Prompt tokens of a request (its `keys`) in the prefix `backend` likely holds cached. */
  const cachedOf = (
    req: RequestInfo,
    keys: Float64Array | undefined,
    backend: string,
    promptTokens: number,
  ): number => {
    if (keys === undefined || keys.length === 0) return 0;
    const chars = credit!.cachedChars(backend, keys);
    return chars === 0 ? 0 : promptTokens * Math.min(1, chars / req.promptText.length);
  };
  /** Tokens to prefill when `cached` of `promptTokens` are likely cached: less the share credited. */
  const creditedPrefill = (promptTokens: number, cached: number): number =>
    cached === 0 ? promptTokens : Math.max(1, promptTokens - p.prefixCredit * cached);

  /** Bring the in-flight area up to `now` (call before flights change). */
  const advance = (b: Backend, now: number): void => {
    if (now > b.areaAt) b.area += b.flights.length * (now - b.areaAt);
    b.areaAt = Math.max(b.areaAt, now);
  };

  const prefillS = (c: Cost, promptTokens: number): number =>
    c.prefill.at(promptTokens) ?? promptTokens * p.priorPrefillS;
  const decodeS = (c: Cost, batch: number): number => c.decode.at(batch) ?? p.priorDecodeS;

  /** The measured backend that would serve a lone request of this shape fastest. */
  const bestCost = (promptTokens: number, out: number): Cost | undefined => {
    let best: Cost | undefined;
    let bestT = Infinity;
    for (let i = 0; i < backendList.length; i++) {
      const b = backendList[i]!;
      if (b.lastSampleAt === undefined) continue;
      const t = prefillS(b, promptTokens) + out * decodeS(b, 1);
      if (t < bestT) {
        bestT = t;
        best = b;
      }
    }
    return best;
  };

  /** Sequences the engine admits at once now (Infinity: no limit seen). */
  const slotsOf = (b: Backend, view: BackendView): number => {
    const m = view.metrics;
    const batching = b.slots >= 2 || (m !== undefined && m.running >= 2);
    let s: number;
    if (m !== undefined) {
      // The engine says whether it queues: requests waiting inside it now → it admits no more
      // than it runs. Otherwise a batching engine takes more (a queue once seen at some count
      // may have been a burst's KV pressure or one long prefill step, not a limit).
      if (m.waiting > 0) s = Math.max(1, m.running);
      else s = batching ? Infinity : Math.max(b.slots, p.defaultSlots);
    } else if (Number.isFinite(b.queuedAt)) s = Math.max(b.slots, b.queuedAt);
    else s = batching ? Infinity : Math.max(b.slots, p.defaultSlots);
    if (Number.isFinite(view.maxConcurrency)) s = Math.min(s, view.maxConcurrency);
    return Math.max(1, s);
  };

  const costOf = (b: Backend, view: BackendView, best: Cost | undefined): Cost => {
    const stale =
      b.lastSampleAt === undefined ||
      (view.inFlight === 0 && decisions - b.lastSampleDecision >= p.exploreAfterDecisions);
    return stale && best ? best : b;
  };

  /** finishEstimate's min-heap of the times each slot frees (reused: one per call was garbage). */
  let freeAt = new Float64Array(64);

  /**
   * b's flights-load cache, made current for this estimate: what it holds was computed for the
   * same flights, fits, predictions, instant, cost and slots, or it is emptied and re-keyed.
   */
  const loadFor = (b: Backend, now: number, c: Cost, slots: number): FlightsLoad => {
    const l = b.load;
    if (
      l.flightsVersion !== b.flightsVersion ||
      l.fitsVersion !== fitsVersion ||
      l.now !== now ||
      l.cost !== c ||
      l.slots !== slots
    ) {
      l.flightsVersion = b.flightsVersion;
      l.fitsVersion = fitsVersion;
      l.now = now;
      l.cost = c;
      l.slots = slots;
      l.hasWait = false;
      l.hasRemaining = false;
    }
    return l;
  };

  /**
   * Seconds from `now` until the request would finish on this backend, costed at `c` (costOf) with
   * `slots` (slotsOf).
   */
  const finishEstimate = (
    b: Backend,
    c: Cost,
    slots: number,
    now: number,
    promptTokens: number,
    out: number,
  ): number => {
    const n = b.flights.length;
    // The batch it joins (itself included), at most what the engine runs at once.
    const batch = Math.min(n + 1, slots);
    const step = decodeS(c, batch);
    const service = prefillS(c, promptTokens) + out * step;
    const load = loadFor(b, now, c, slots);
    if (!load.hasWait) {
      load.wait = n < slots ? prefillWait(b, c, now) : slotWait(b, c, now, slots, step);
      load.hasWait = true;
    }
    return load.wait + service;
  };

  /**
   * Seconds until the prompts in prefill on b are done: an engine runs a prompt's prefill as one
   * step the whole batch waits on, so a request pushed while earlier prompts are still in prefill
   * starts after them.
   */
  const prefillWait = (b: Backend, c: Cost, now: number): number => {
    const flights = b.flights;
    let prefilling = 0;
    for (let j = 0; j < flights.length; j++) {
      const f = flights[j]!;
      const left = prefillS(c, f.prefillTokens) - (now - f.dispatchedAt) / 1000;
      if (left > prefilling) prefilling = left;
    }
    return prefilling;
  };

  /**
   * All slots busy: seconds until one frees for a new request, replaying the in-flight requests
   * FIFO over `slots` servers (a min-heap of the times each server frees).
   */
  const slotWait = (b: Backend, c: Cost, now: number, slots: number, step: number): number => {
    const flights = b.flights;
    const n = flights.length;
    if (freeAt.length < n) freeAt = new Float64Array(n * 2);
    const free = freeAt;
    let size = 0;
    for (let i = 0; i < n; i++) {
      const f = flights[i]!;
      const work = prefillS(c, f.prefillTokens) + expectedOf(f) * step;
      if (i < slots) {
        // Running: what is left of its expected work (at least a sliver: it has not finished yet).
        heapPush(free, size++, Math.max(work * 0.05, work - (now - f.dispatchedAt) / 1000));
      } else {
        heapReplaceTop(free, size, free[0]! + work);
      }
    }
    return free[0]!;
  };

  /**
   * Seconds this request would add, summed, to the requests already running on the backend
   * (costed at `c` with `slots`, as finishEstimate).
   */
  const delayToOthers = (
    b: Backend,
    c: Cost,
    slots: number,
    now: number,
    promptTokens: number,
    out: number,
  ): number => {
    const flights = b.flights;
    const n = flights.length;
    // The others it will run beside: all in flight below the limit; when the engine is full it
    // queues and, once admitted, runs in a full batch (slots - 1 others).
    const k = Math.min(n, slots - 1);
    if (k <= 0) return 0;
    const stall = (c.prefill.slope ?? p.priorPrefillS) * promptTokens;
    const v = c.decode.slope ?? 0;
    const from = Math.ceil(n - k);
    // Queued case: the last k pushed are the ones still running when it is admitted.
    const load = loadFor(b, now, c, slots);
    if (!load.hasRemaining) {
      if (load.remaining.length < n) load.remaining = new Float64Array(n * 2);
      const remaining = load.remaining;
      const step = decodeS(c, k + 1);
      for (let i = from; i < n; i++) {
        const f = flights[i]!;
        const elapsed = n >= slots ? 0 : (now - f.dispatchedAt) / 1000 - prefillS(c, f.prefillTokens);
        remaining[i] = Math.max(1, expectedOf(f) - Math.max(0, elapsed) / step);
      }
      load.hasRemaining = true;
    }
    const remaining = load.remaining;
    let overlap = 0;
    for (let i = from; i < n; i++) overlap += Math.min(out, remaining[i]!);
    return k * stall + v * overlap;
  };

  /**
   * Requests the engine takes now before one pushed there would wait behind another inside it
   * (at most one waits inside: it is admitted at the next room, and whoever comes later is still
   * free to go elsewhere). From engine metrics: at the last read it had `waiting` queued; what this
   * router pushed since joins them, each that ended since lets one in, and one that queued nothing
   * at the read still admits about as many as it has been seen run beyond its batch then (at
   * least one). Without metrics: the sequences it is known to run at once less those in flight
   * (no limit once seen batching without a queue; one before anything is known, so a burst at
   * start-up is not committed blind).
   */
  const roomInside = (b: Backend, view: BackendView): number => {
    const m = view.metrics;
    if (m === undefined) {
      const s = slotsOfLearned(b);
      return Number.isFinite(s) ? Math.max(0, s + 1 - view.inFlight) : Infinity;
    }
    const net = view.dispatchedSinceMetrics - view.completedSinceMetrics;
    if (m.waiting > 0) return Math.max(0, 1 - m.waiting - net);
    return Math.max(0, Math.max(1, b.slots - m.running) + 1 - net);
  };

  /** Predicted service seconds of a request on the backend best for it (its HRRN size). */
  const sizeOf = (promptTokens: number, predicted: number, best: Cost | undefined): number => {
    const c = best;
    const out = calibration.at(predicted) ?? predicted;
    const t = c
      ? prefillS(c, promptTokens) + out * decodeS(c, 1)
      : promptTokens * p.priorPrefillS + out * p.priorDecodeS;
    return Math.max(1e-3, t);
  };

  /**
   * Late binding: marks in `open` the candidates with room for the request (see roomInside), and
   * says whether to hold it in the router instead: when none has room. The room depends on the
   * candidates' load alone, so the scheduler holds the model's other waiters without asking until a
   * backend changes (heldByLoad), and offers them in response-ratio order (responseRatio) when
   * one does: the room that frees goes to the highest ratio first.
   */
  const holdForLater = (candidates: readonly BackendView[]): boolean => {
    let room = 0;
    if (candState.length < candidates.length) growCandidates(candidates.length);
    for (let i = 0; i < candidates.length; i++) {
      const c = candidates[i]!;
      const b = stateOf(c);
      candState[i] = b;
      const r = roomInside(b, c);
      open[i] = r > 0 ? 1 : 0;
      room += r;
    }
    return room === 0;
  };

  /** Standard error of candidate i's service estimate for this request (its fits' uncertainty). */
  const serviceError = (i: number, promptTokens: number, out: number): number => {
    const c = candCost[i]!;
    const batch = Math.min(candState[i]!.flights.length + 1, candSlots[i]!);
    return Math.hypot(c.prefill.stderr(promptTokens), out * c.decode.stderr(batch));
  };

  const fill = (req: RequestInfo, candidates: readonly BackendView[], now: number, out: Float64Array) => {
    const promptTokens = promptTokensOf(req);
    const predicted = predictOf(req, promptTokens);
    if (candState.length < candidates.length) growCandidates(candidates.length);
    for (let i = 0; i < candidates.length; i++) candState[i] = stateOf(candidates[i]!);
    fillWith(req, candidates, now, promptTokens, predicted, bestCost(promptTokens, predicted), out);
  };

  /** Per candidate of the current estimate (candState set by the caller): its costs and finish. */
  const fillWith = (
    req: RequestInfo,
    candidates: readonly BackendView[],
    now: number,
    promptTokens: number,
    predicted: number,
    best: Cost | undefined,
    out: Float64Array,
  ) => {
    const keys = keysOf(req);
    for (let i = 0; i < candidates.length; i++) {
      const view = candidates[i]!;
      const b = candState[i]!;
      const c = costOf(b, view, best);
      const slots = slotsOf(b, view);
      candCost[i] = c;
      candSlots[i] = slots;
      const cached = cachedOf(req, keys, view.name, promptTokens);
      candCached[i] = cached;
      const u = creditedPrefill(promptTokens, cached);
      uncached[i] = u;
      out[i] = finishEstimate(b, c, slots, now, u, predicted);
    }
  };

  /** size() of a request alone (no array per call). */
  const sizeOne: RequestInfo[] = [];
  const sizeOut = new Float64Array(1);
  /** The sampled backends' prefill fits and seconds per output token alone, for sizesOf. */
  const sizePrefill: LinearFit[] = [];
  let sizeDecode1 = new Float64Array(8);

  /**
   * HRRN sizes (sizeOf at the best backend: bestCost) of requests, one after another: what does
   * not depend on the request (token ratio, the fits, each backend's decode step alone) read once.
   * Memoised per prompt length until the next completion learned from (sizeMemo).
   */
  const sizesOf = (reqs: readonly RequestInfo[], out: Float64Array): void => {
    if (model !== undefined) {
      for (let i = 0; i < reqs.length; i++) {
        const req = reqs[i]!;
        const promptTokens = promptTokensOf(req);
        const predicted = predictOf(req, promptTokens);
        out[i] = sizeOf(promptTokens, predicted, bestCost(promptTokens, predicted));
      }
      return;
    }
    const perChar = tokensPerChar.value ?? p.initialTokensPerChar;
    // bestCost's candidates: the backends with a sample, in its order.
    let count = 0;
    for (let j = 0; j < backendList.length; j++) {
      const b = backendList[j]!;
      if (b.lastSampleAt === undefined) continue;
      if (count === sizeDecode1.length) {
        const grown = new Float64Array(count * 2);
        grown.set(sizeDecode1);
        sizeDecode1 = grown;
      }
      sizePrefill[count] = b.prefill;
      sizeDecode1[count] = decodeS(b, 1);
      count++;
    }
    const memo = (sizeMemo ??= {
      stamp: new Float64Array(SIZE_MEMO).fill(-1),
      cap: new Float64Array(SIZE_MEMO),
      model: new Array<string | undefined>(SIZE_MEMO).fill(undefined),
      size: new Float64Array(SIZE_MEMO),
    });
    for (let i = 0; i < reqs.length; i++) {
      const req = reqs[i]!;
      const promptTokens = Math.max(1, Math.round(req.promptText.length * perChar));
      // Every held request is sized again at each epoch; many share a prompt length.
      const memoised = promptTokens < SIZE_MEMO;
      const cap = req.maxTokens !== undefined && req.maxTokens > 0 ? req.maxTokens : 0;
      if (
        memoised &&
        memo.stamp[promptTokens] === sizeStamp &&
        memo.cap[promptTokens] === cap &&
        memo.model[promptTokens] === req.model
      ) {
        out[i] = memo.size[promptTokens]!;
        continue;
      }
      const predicted = output.predict(req.model, promptTokens, req.maxTokens);
      // bestCost, with prefillS and decodeS at batch 1 of the best kept for sizeOf.
      let found = false;
      let bestT = Infinity;
      let bestPrefill = 0;
      let bestDecode = 0;
      for (let j = 0; j < count; j++) {
        const prefill = sizePrefill[j]!.at(promptTokens) ?? promptTokens * p.priorPrefillS;
        const decode = sizeDecode1[j]!;
        const t = prefill + predicted * decode;
        if (t < bestT) {
          bestT = t;
          bestPrefill = prefill;
          bestDecode = decode;
          found = true;
        }
      }
      const o = calibration.at(predicted) ?? predicted;
      const size = Math.max(
        1e-3,
        found ? bestPrefill + o * bestDecode : promptTokens * p.priorPrefillS + o * p.priorDecodeS,
      );
      out[i] = size;
      if (memoised) {
        memo.stamp[promptTokens] = sizeStamp;
        memo.cap[promptTokens] = cap;
        memo.model[promptTokens] = req.model;
        memo.size[promptTokens] = size;
      }
    }
  };

  /** Whether candidate i goes before candidate j among near-best estimates. */
  const tieBreak = (candidates: readonly BackendView[], i: number, j: number): boolean => {
    const c = candidates[i]!;
    const chosen = candidates[j]!;
    if (c.inFlight !== chosen.inFlight) return c.inFlight < chosen.inFlight;
    const cm = candState[i]!.lastSampleAt !== undefined;
    const xm = candState[j]!.lastSampleAt !== undefined;
    if (cm !== xm) return !cm;
    return rrBefore(c.index, chosen.index, cursor);
  };

  return {
    name: 'estimated-wait',
    heldByLoad: () => heldOnLoad,
    responseRatio:
      p.lateBinding && p.heldOrder === 'ratio'
        ? {
            size(req) {
              sizeOne[0] = req;
              sizesOf(sizeOne, sizeOut);
              return sizeOut[0]!;
            },
            sizes: (reqs, out) => sizesOf(reqs, out),
            epoch: () => sizeEpoch,
            holdsAll: (candidates) => holdForLater(candidates),
          }
        : undefined,
    pick(req, candidates, now) {
      lastNow = now;
      picked = undefined;
      const n = candidates.length;
      if (n === 0) return undefined;
      if (scratch.length < n) {
        scratch = new Float64Array(n * 2);
        open = new Uint8Array(n * 2);
      }
      heldOnLoad = false;
      if (!p.lateBinding) {
        open.fill(1, 0, n);
        if (candState.length < n) growCandidates(n);
        for (let i = 0; i < n; i++) candState[i] = stateOf(candidates[i]!);
      } else if (holdForLater(candidates)) {
        heldOnLoad = true;
        return undefined;
      }
      const promptTokens = promptTokensOf(req);
      const predicted = predictOf(req, promptTokens);
      const best = bestCost(promptTokens, predicted);
      fillWith(req, candidates, now, promptTokens, predicted, best, scratch);
      if (p.othersWeight > 0) {
        for (let i = 0; i < n; i++) {
          scratch[i]! +=
            p.othersWeight *
            delayToOthers(candState[i]!, candCost[i]!, candSlots[i]!, now, uncached[i]!, predicted);
        }
      }
      let min = Infinity;
      let at = -1;
      for (let i = 0; i < n; i++) {
        if (open[i] === 1 && scratch[i]! < min) {
          min = scratch[i]!;
          at = i;
        }
      }
      if (at < 0) return undefined; // unreachable: holdForLater holds when none is open
      // Near-best estimates are ties: fewer in flight, then an unmeasured backend (to measure
      // it), then round-robin order. Near: within tieTolerance, or within tieStdErrors of the
      // two fits' combined standard error.
      const errors = p.tieStdErrors > 0;
      const minErr = errors ? serviceError(at, promptTokens, predicted) : 0;
      let chosen = -1;
      for (let i = 0; i < n; i++) {
        if (open[i] !== 1) continue;
        const t = scratch[i]!;
        const near =
          t <= min * (1 + p.tieTolerance) + 1e-12 ||
          t - min <=
            p.tieStdErrors * Math.hypot(errors ? serviceError(i, promptTokens, predicted) : 0, minErr);
        if (!near) continue;
        if (chosen < 0 || tieBreak(candidates, i, chosen)) chosen = i;
      }
      // Every estimate is finite and ≥ 0 (fits are clamped), so one is always within the limit.
      if (chosen < 0) chosen = at;
      const view = candidates[chosen]!;
      cursor = view.index + 1;
      decisions++;
      lastCount = n;
      picked = req;
      pickedView = view;
      pickedFits = fitsVersion;
      pickedPromptTokens = promptTokens;
      pickedPredicted = predicted;
      pickedCached = candCached[chosen]!;
      return view;
    },
    explainLast() {
      // Copied only when a decision is explained; scratch holds the last pick's estimates.
      return {
        name: 'estimated-wait: seconds to finish',
        scores: Array.from(scratch.subarray(0, lastCount)),
      };
    },
    estimates(req, candidates, now, out) {
      lastNow = now;
      picked = undefined;
      fill(req, candidates, now, out);
      decisions++;
    },
    onDispatch(req, backend, now) {
      lastNow = now;
      const b = stateOf(backend);
      let promptTokens: number;
      let predicted: number;
      let cachedTokens: number;
      if (req === picked && backend === pickedView && fitsVersion === pickedFits) {
        // Just picked (nothing learned since): what the pick found for it there.
        promptTokens = pickedPromptTokens;
        predicted = pickedPredicted;
        cachedTokens = pickedCached;
      } else {
        promptTokens = promptTokensOf(req);
        predicted = predictOf(req, promptTokens);
        cachedTokens = cachedOf(req, keysOf(req), backend.name, promptTokens);
      }
      picked = undefined;
      const prefillTokens = creditedPrefill(promptTokens, cachedTokens);
      credit?.record(req.id, backend.name, req.promptText);
      advance(b, now);
      const f: Flight = {
        dispatchedAt: now,
        promptTokens,
        prefillTokens,
        cachedTokens,
        model: req.model,
        maxTokens: req.maxTokens,
        expectedOut: predicted,
        predictedAtPush: predicted,
        ver: output.version,
        ahead: b.flights.length,
        area0: b.area,
      };
      const old = b.flightById.get(req.id);
      // Pushed again under the same id before it ended: it keeps its place (as a Map's set would).
      if (old !== undefined) b.flights[b.flights.indexOf(old)] = f;
      else b.flights.push(f);
      b.flightsVersion++;
      b.flightById.set(req.id, f);
    },
    onComplete(req, backend, report, now) {
      lastNow = now;
      const b = stateOf(backend);
      const f = b.flightById.get(req.id);
      if (!f) return;
      advance(b, now);
      b.flightById.delete(req.id);
      b.flights.splice(b.flights.indexOf(f), 1);
      b.flightsVersion++;
      learnedOut.delete(req.id);
      if (!report.ok) return;
      learn(b, backend, req, f, report, now);
    },
    onBackendRemoved(name) {
      picked = undefined;
      sizeStamp++; // bestCost no longer sees it: sizes memoised with it are stale
      const b = backends.get(name);
      if (b !== undefined) {
        backends.delete(name);
        backendList.splice(backendList.indexOf(b), 1);
        for (let i = 0; i < byIndex.length; i++) if (byIndex[i] === b) byIndex[i] = undefined;
      }
      credit?.removeBackend(name);
      sizeEpoch++;
    },
    describe(name) {
      const b = backends.get(name);
      if (!b) return {};
      const out: Record<string, number> = { slots: b.slots, inFlightTracked: b.flights.length };
      if (Number.isFinite(b.queuedAt)) out.queuedAtInFlight = b.queuedAt;
      const batch = Math.max(1, b.flights.length);
      const prefill = b.prefill.slope;
      if (prefill !== undefined) out.prefillSPerToken = prefill;
      const decode = b.decode.at(batch);
      if (decode !== undefined) {
        out.decodeSPerToken = decode;
        out.decodeSlopeSPerSeq = b.decode.slope ?? 0;
      }
      let pending = 0;
      for (const f of b.flights) {
        pending += Math.max(
          0,
          prefillS(b, f.prefillTokens) +
            expectedOf(f) * decodeS(b, batch) -
            (lastNow - f.dispatchedAt) / 1000,
        );
      }
      out.pendingWorkS = pending;
      if (credit !== undefined) out.prefixChunks = credit.sizeOf(name);
      return out;
    },
  };

  function learn(
    b: Backend,
    view: BackendView,
    req: RequestInfo,
    f: Flight,
    r: CompletionReport,
    now: number,
  ): void {
    fitsVersion++;
    const promptTokens = r.promptTokens;
    const outTokens = r.completionTokens;
    if (promptTokens !== undefined && promptTokens > 0 && req.promptText.length > 0) {
      tokensPerChar.update(promptTokens / req.promptText.length);
    }
    // A capped answer is censored (its natural length is at least the cap): the predictor counts it apart.
    if (outTokens !== undefined && outTokens > 0) {
      output.observe(req.model, promptTokens ?? f.promptTokens, outTokens, req.maxTokens);
      // Same prompt tokens as it was asked with (the router's estimate), so features match.
      model?.observe(
        {
          model: req.model,
          promptTokens: f.promptTokens,
          maxTokens: req.maxTokens,
          text: req.promptText,
          hint: req.taskHint,
        },
        outTokens,
      );
      calibration.update(f.predictedAtPush, outTokens);
    }
    const wallS = (r.finishedAt - r.dispatchedAt) / 1000;
    // The batch it ran in: the backend's mean in-flight count over its life (itself included),
    // at most what the engine runs at once (requests queued behind a serial engine do not slow it).
    const lifeMs = now - f.dispatchedAt;
    const slots = slotsOf(b, view);
    const batch = Math.min(slots, lifeMs > 0 ? (b.area - f.area0) / lifeMs : f.ahead + 1);
    const reported = promptTokens !== undefined && promptTokens > 0 ? promptTokens : f.promptTokens;
    // The engine prefilled only what it had not cached: fitted against the tokens the credit left.
    const tokens =
      f.cachedTokens === 0
        ? reported
        : creditedPrefill(reported, f.cachedTokens * (reported / f.promptTokens));
    if (r.promptEvalMs !== undefined && r.evalMs !== undefined) {
      // Engine-measured: exact rates, and whether the request queued inside the engine.
      b.prefill.update(tokens, r.promptEvalMs / 1000);
      if (outTokens !== undefined && outTokens > 0)
        b.decode.update(batch, r.evalMs / 1000 / outTokens, Math.min(outTokens, 512));
      const engineS = (r.promptEvalMs + r.evalMs) / 1000;
      // Relative threshold: the gap also holds network and proxy time (ms), runs may be
      // time-scaled, and a batching engine admits a request only at its next step.
      const step = decodeS(b, batch);
      const queued = wallS - engineS > 0.002 + 0.02 * wallS + 1.5 * step;
      if (!queued) {
        b.slots = Math.max(b.slots, f.ahead + 1);
        // It ran beside more than the engine was thought to admit: the limit seen was transient.
        if (b.slots > b.queuedAt) b.queuedAt = Infinity;
      } else if (f.ahead >= b.slots) {
        b.queuedAt = Math.min(b.queuedAt, f.ahead);
      }
    } else if (f.ahead < slotsOfLearned(b)) {
      // Wall-clock only, and the request should not have queued: split it at the first byte.
      const first = r.firstByteAt;
      if (r.firstByteIsWholeAnswer === true) {
        // Non-streamed: the first byte is the whole answer. Split its time in the ratio whole
        // answers of varied sizes show, else by the current model (else the priors' ratio).
        b.wall.update(tokens, outTokens ?? 0, wallS);
        const fitted = b.wall.rates();
        const pre = b.prefill.at(tokens);
        const s = splitWall(
          wallS,
          tokens,
          outTokens ?? 0,
          fitted?.prefillSPerToken ?? (pre !== undefined && tokens > 0 ? pre / tokens : p.priorPrefillS),
          fitted?.decodeSPerToken ?? b.decode.at(batch) ?? p.priorDecodeS,
        );
        if (s !== undefined) {
          if (tokens > 0) b.prefill.update(tokens, s.prefillS);
          if (outTokens !== undefined && outTokens > 0)
            b.decode.update(batch, s.decodeSPerToken, Math.min(outTokens, 512));
        }
      } else if (first !== undefined && outTokens !== undefined && outTokens > 1 && first < r.finishedAt) {
        b.prefill.update(tokens, (first - r.dispatchedAt) / 1000);
        b.decode.update(batch, (r.finishedAt - first) / 1000 / (outTokens - 1), Math.min(outTokens, 512));
      } else if (outTokens !== undefined && outTokens > 0) {
        const pre = b.prefill.at(tokens) ?? 0;
        b.decode.update(batch, Math.max(0, wallS - pre) / outTokens, Math.min(outTokens, 512));
      }
    }
    b.lastSampleAt = now;
    b.lastSampleDecision = decisions;
    sizeStamp++;
    if (++learned >= resizeAt) {
      sizeEpoch++;
      resizeAt = learned + Math.min(64, Math.max(1, Math.ceil(learned / 16)));
    }
  }

  function slotsOfLearned(b: Backend): number {
    return Number.isFinite(b.queuedAt) || b.slots < 2 ? Math.max(b.slots, p.defaultSlots) : Infinity;
  }
}

/**
 * What a backend's requests in flight add to the estimate of one more request there: the wait
 * before it starts (finishEstimate) and how much of their answers is left (delayToOthers). The
 * same for every request costed there until its flights, the fits or predictions change, or time
 * moves: the picks of one pump (a freed slot lets several held requests go) reuse it rather than
 * walking every flight per candidate per request.
 */
interface FlightsLoad {
  flightsVersion: number;
  fitsVersion: number;
  now: number;
  /** The fits the values were computed with (the backend's own, or the fleet's best: costOf). */
  cost: Cost | undefined;
  slots: number;
  hasWait: boolean;
  wait: number;
  /** Per flight index (delayToOthers' last k), its predicted output tokens still to come. */
  hasRemaining: boolean;
  remaining: Float64Array;
}

/** Prompt lengths (tokens) below which HRRN sizes are memoised. */
const SIZE_MEMO = 4096;

interface SizeMemo {
  readonly stamp: Float64Array;
  readonly cap: Float64Array;
  readonly model: (string | undefined)[];
  readonly size: Float64Array;
}

/** Whether index a comes before index b in round-robin order starting at `cursor`. */
function rrBefore(a: number, b: number, cursor: number): boolean {
  const da = a >= cursor ? a - cursor : a - cursor + 1e9;
  const db = b >= cursor ? b - cursor : b - cursor + 1e9;
  return da < db;
}

/** Adds `v` to the min-heap in h[0, n). */
function heapPush(h: Float64Array, n: number, v: number): void {
  let i = n;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (h[p]! <= v) break;
    h[i] = h[p]!;
    i = p;
  }
  h[i] = v;
}

/** Replace the minimum of the min-heap in h[0, n) with `v` and restore the heap. */
function heapReplaceTop(h: Float64Array, n: number, v: number): void {
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    if (l >= n) break;
    const r = l + 1;
    const c = r < n && h[r]! < h[l]! ? r : l;
    if (h[c]! >= v) break;
    h[i] = h[c]!;
    i = c;
  }
  h[i] = v;
}
