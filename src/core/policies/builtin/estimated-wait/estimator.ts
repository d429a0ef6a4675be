import type { BackendView, CompletionReport, RequestInfo } from '../../../types.js';
import type { PromptKeys } from '../../shared/prefix-credit.js';
import { addFlight, advanceArea, BackendRegistry, removeFlight } from './backend-state.js';
import type { BackendState, Cost, Flight } from './backend-state.js';
import { CachedPrefix, CHUNK_CHARS } from './cached-prefix.js';
import { candidateCost } from './candidate-cost.js';
import { creditedIn, learnRates, reportedPrompt } from './learn-rates.js';
import type { EstimatedWaitParams } from './params.js';
import { Rates } from './rates.js';
import { Sizing } from './sizing.js';
import { SlotMirror } from './slot-mirror.js';
import { slotsOf } from './slots.js';
import { WaitModel } from './wait-model.js';

/** How many times the learned record's size the affinity memory remembers (affinityMemory). */
const AFFINITY_SPAN = 4;

/**
 * An answer this close to the fleet's best lone service (a ratio) resets a backend's exploration
 * backoff (resetExplores): one answer's engine time varies by batch and cache by more than the tie
 * tolerance, and a replica worth avoiding (prefix-unequal-8's: 3×) is far outside it.
 */
const EXPLORE_RESET = 1.25;

/**
 * The estimated-wait policy's estimates without its choice: per candidate backend, the seconds
 * from now until a request would finish there (candidate-cost.ts), learned from what it is told
 * of dispatches and completions. The policy (policy.ts) picks with it; the estimated-wait scorer
 * scores with it alone.
 *
 * Per candidate of the current estimate it keeps, found once (the policy's tie-break and the
 * dispatch after a pick read them): its state, the cost it was priced at (costOf), its slots
 * (slotsOf), the prompt tokens it likely holds cached and those it would prefill.
 */
export class WaitEstimator {
  readonly registry: BackendRegistry;
  readonly rates: Rates;
  readonly sizing: Sizing;
  readonly wait: WaitModel;
  readonly prefix: CachedPrefix;
  /**
   * The longer memory of what was sent where (affinityMemory): `prefix`'s record, AFFINITY_SPAN
   * times larger and never shrunk, for a prompt the learned record has forgotten. Undefined: off.
   */
  readonly affinity: CachedPrefix | undefined;
  /**
   * Engines whose cache is their slots (they say so: metrics.cache.slots, llama.cpp's /props): their
   * credit is what this mirror of the slots says, not the record's (prefix credit on).
   */
  readonly slotMirror: SlotMirror | undefined;
  /** Routing decisions counted (estimates, picks): an idle backend's samples go stale in decisions, not time. */
  decisions = 0;
  /** The instant of the last call (describe's pending work is read at it). */
  lastNow = 0;
  readonly candState: BackendState[] = [];
  readonly candCost: Cost[] = [];
  candSlots = new Float64Array(8);
  candCached = new Float64Array(8);
  /** Per candidate: the prompt tokens to prefill there (prefix credit applied). */
  uncached = new Float64Array(8);
  /** Per candidate: prompt tokens of another prompt its slots would drop (slot engines, slotEvictWeight). */
  evicted = new Float64Array(8);
  /** cachedAt's prompt tokens of another prompt the slot would drop (0 off slot engines). */
  private slotEvicted = 0;
  /**
   * The last pick, for its dispatch (which comes right after it): the request, where it went, and
   * what was found for it there — not looked up twice while nothing was learned in between.
   */
  private picked: RequestInfo | undefined;
  private pickedView: BackendView | undefined;
  private pickedFits = -1;
  private pickedPromptTokens = 0;
  private pickedPredicted = 0;
  private pickedCached = 0;
  /** Whether the last pick's backend was priced at the fleet's best (costOf: stale), not its own fits. */
  private pickedExplored = false;

  constructor(readonly p: EstimatedWaitParams) {
    this.registry = new BackendRegistry(p.alpha);
    this.rates = new Rates(p.priorPrefillS, p.priorDecodeS);
    this.sizing = new Sizing(p, this.rates);
    this.wait = new WaitModel(this.rates, this.sizing);
    this.prefix = new CachedPrefix(
      p.prefixCredit,
      p.prefixCacheChunks !== undefined
        ? p.prefixCacheChunks * CHUNK_CHARS * p.initialTokensPerChar
        : p.prefixCacheTokens,
      p.initialTokensPerChar,
    );
    this.affinity =
      p.affinityMemory > 0 && p.prefixCredit > 0
        ? new CachedPrefix(1, p.prefixCacheTokens * AFFINITY_SPAN, p.initialTokensPerChar, this.prefix)
        : undefined;
    this.slotMirror = p.prefixCredit > 0 ? new SlotMirror(CHUNK_CHARS) : undefined;
  }

  /** Whether `view`'s engine keeps its cache in slots (it says so) and the slot mirror credits it. */
  private onSlots(view: BackendView): boolean {
    return this.slotMirror !== undefined && view.metrics?.cache?.slots !== undefined;
  }

  /**
   * Prompt tokens of `req` that `view`'s engine would find cached: on an engine whose cache is its
   * slots, what the slot mirror says, in whole chunks as the record counts them (a few shared
   * characters, "Document 3" after "Document 0", would otherwise break every tie toward the engine
   * sent the last prompt: live, the warm-up's six documents all went to one engine, evicting each
   * other), and `slotEvicted` the prompt tokens of another prompt its slot would drop; elsewhere
   * the learned record's (`keys`: its keysOf, asked here when not given) and `slotEvicted` 0.
   */
  private cachedAt(
    req: RequestInfo,
    keys: PromptKeys | undefined,
    view: BackendView,
    promptTokens: number,
  ): number {
    this.slotEvicted = 0;
    if (!this.onSlots(view))
      return this.prefix.cachedOf(req, keys ?? this.prefix.keysOf(req), view.name, promptTokens);
    const shared = this.slotMirror!.look(view.name, req.promptText);
    this.slotEvicted = this.slotMirror!.evicted * this.sizing.tokensPerChar;
    const chars = shared - (shared % CHUNK_CHARS);
    return chars === 0 ? 0 : promptTokens * Math.min(1, chars / req.promptText.length);
  }

  /** Sets candState for `candidates` (their states, made on first sight). */
  bind(candidates: readonly BackendView[]): void {
    const n = candidates.length;
    if (this.candState.length < n) this.grow(n);
    for (let i = 0; i < n; i++) this.candState[i] = this.registry.stateOf(candidates[i]!);
  }

  private grow(n: number): void {
    this.candState.length = n;
    this.candCost.length = n;
    if (this.candSlots.length < n) {
      this.candSlots = new Float64Array(n * 2);
      this.candCached = new Float64Array(n * 2);
      this.uncached = new Float64Array(n * 2);
      this.evicted = new Float64Array(n * 2);
    }
  }

  /** The measured backend that would serve a lone request of this shape fastest. */
  bestCost(promptTokens: number, out: number): Cost | undefined {
    return this.rates.bestCost(this.registry.list, promptTokens, out);
  }

  /**
   * The fits b is priced at: its own, or the fleet's best when it has no sample or its samples
   * went stale while it sat idle (no winner-takes-all: it is tried, so re-measured). Each try
   * doubles the wait before the next (exploreBackoff): a replica that is truly slower is not
   * re-tried, at a request's cost, every few decisions it sits idle.
   */
  costOf(b: BackendState, view: BackendView, best: Cost | undefined): Cost {
    const stale =
      b.lastSampleAt === undefined ||
      (view.inFlight === 0 &&
        this.decisions - b.lastSampleDecision >=
          this.p.exploreAfterDecisions * 2 ** Math.min(b.explores, this.p.exploreBackoff));
    return stale && best ? best : b;
  }

  /**
   * Writes per candidate (candState set by bind) its candidateCost for this request into `out`,
   * and keeps what it was priced with (candCost, candSlots, candCached, uncached).
   */
  fillWith(
    req: RequestInfo,
    candidates: readonly BackendView[],
    now: number,
    promptTokens: number,
    predicted: number,
    best: Cost | undefined,
    out: Float64Array,
    othersWeight: number,
  ): void {
    const keys = this.prefix.keysOf(req);
    const aff = keys !== undefined && keys.length > 0 ? this.affinity : undefined;
    for (let i = 0; i < candidates.length; i++) {
      const view = candidates[i]!;
      const b = this.candState[i]!;
      const c = this.costOf(b, view, best);
      const slots = slotsOf(b, view, this.p.defaultSlots);
      this.candCost[i] = c;
      this.candSlots[i] = slots;
      const cached = this.cachedAt(req, keys, view, promptTokens);
      this.candCached[i] = cached;
      this.evicted[i] = this.p.slotEvictWeight > 0 ? this.slotEvicted : 0;
      let credited = cached;
      if (aff !== undefined && !this.onSlots(view) && cached < 0.5 * promptTokens) {
        // Forgotten by the learned record (or never sent here): an engine often still holds part of
        // what it was sent longer ago (issue #30: at the knee, ~half of it 20–40 s after), and going
        // back there keeps the prompt's blocks in one cache, not two.
        // The same chunking as the learned record: its keys serve (a prompt it has no keys for, none
        // sent before shared its first chunk, is in neither).
        const old = aff.cachedOf(req, keys, view.name, promptTokens);
        credited = Math.max(cached, this.p.affinityMemory * old);
      }
      const u = this.prefix.creditedPrefill(promptTokens, credited);
      this.uncached[i] = u;
      out[i] = candidateCost(this.wait, b, c, slots, now, u, predicted, othersWeight);
    }
  }

  /** Writes, per candidate, the seconds from `now` until this request would finish there; counts a decision. */
  estimates(req: RequestInfo, candidates: readonly BackendView[], now: number, out: Float64Array): void {
    this.lastNow = now;
    this.picked = undefined;
    const promptTokens = this.sizing.promptTokensOf(req);
    const predicted = this.sizing.predictOf(req, promptTokens);
    this.bind(candidates);
    this.fillWith(
      req,
      candidates,
      now,
      promptTokens,
      predicted,
      this.bestCost(promptTokens, predicted),
      out,
      0,
    );
    this.decisions++;
  }

  /** The policy picked `view` for `req`: its dispatch, if it comes next, reuses what was found. */
  rememberPick(
    req: RequestInfo,
    view: BackendView,
    promptTokens: number,
    predicted: number,
    cached: number,
    explored: boolean,
  ): void {
    this.picked = req;
    this.pickedExplored = explored;
    this.pickedView = view;
    this.pickedFits = this.wait.fits;
    this.pickedPromptTokens = promptTokens;
    this.pickedPredicted = predicted;
    this.pickedCached = cached;
  }

  forgetPick(): void {
    this.picked = undefined;
  }

  onDispatch(req: RequestInfo, backend: BackendView, now: number): void {
    this.lastNow = now;
    const b = this.registry.stateOf(backend);
    let promptTokens: number;
    let predicted: number;
    let cachedTokens: number;
    // The dispatch of the last pick (one check for both uses; by name: a host may hand the same
    // backend over as a fresh view).
    const justPicked = req === this.picked && backend.name === this.pickedView?.name;
    // A push this router picked on the fleet's best fits (a try) counts toward the backoff; a try
    // that finds it as fast as the fleet's best resets it (onComplete).
    if (justPicked && this.pickedExplored) b.explores++;
    if (justPicked && this.wait.fits === this.pickedFits) {
      // Just picked (nothing learned since): what the pick found for it there.
      promptTokens = this.pickedPromptTokens;
      predicted = this.pickedPredicted;
      cachedTokens = this.pickedCached;
    } else {
      promptTokens = this.sizing.promptTokensOf(req);
      predicted = this.sizing.predictOf(req, promptTokens);
      cachedTokens = this.cachedAt(req, undefined, backend, promptTokens);
    }
    this.picked = undefined;
    const cache = backend.metrics?.cache;
    if (cache !== undefined) {
      // The engine says what its cache holds: the learned size starts there and never passes it.
      this.prefix.capTo(backend.name, cache.tokens);
      if (cache.slots !== undefined) this.slotMirror?.push(backend.name, cache.slots, req.id, req.promptText);
    }
    const prefillTokens = this.prefix.creditedPrefill(promptTokens, cachedTokens);
    // The affinity memory records the learned record's keys (asked before that record drops them).
    const keys = this.affinity !== undefined ? this.prefix.keysOf(req) : undefined;
    this.prefix.record(req.id, backend.name, req.promptText, this.sizing.tokensPerChar);
    this.affinity?.record(req.id, backend.name, req.promptText, this.sizing.tokensPerChar, keys);
    advanceArea(b, now);
    const f: Flight = {
      dispatchedAt: now,
      promptTokens,
      prefillTokens,
      cachedTokens,
      model: req.model,
      maxTokens: req.maxTokens,
      expectedOut: predicted,
      predictedAtPush: predicted,
      ver: this.sizing.outputVersion,
      ahead: b.flights.length,
      area0: b.area,
    };
    addFlight(b, req.id, f);
  }

  onComplete(req: RequestInfo, backend: BackendView, report: CompletionReport, now: number): void {
    this.lastNow = now;
    const b = this.registry.stateOf(backend);
    if (!b.flightById.has(req.id)) return;
    advanceArea(b, now);
    const f = removeFlight(b, req.id)!;
    this.slotMirror?.finish(backend.name, req.id);
    this.sizing.forget(req.id);
    if (!report.ok) return;
    this.wait.fitsChanged();
    this.sizing.observe(req, f, report);
    const reported = reportedPrompt(report, f);
    const predicted = creditedIn(f, reported);
    const m = backend.metrics;
    // What the engine found cached, against what the record predicted (in the engine's tokens): said
    // by the answer, or else by the engine's prefix-cache counters over a window of answers.
    if (report.cachedTokens !== undefined)
      this.prefix.learn(backend.name, predicted, report.cachedTokens, reported, this.sizing.tokensPerChar);
    else if (m?.prefixCacheQueries !== undefined && m.prefixCacheHits !== undefined)
      this.prefix.learnFromCounters(
        backend.name,
        m.prefixCacheQueries,
        m.prefixCacheHits,
        predicted,
        reported,
        this.sizing.tokensPerChar,
      );
    learnRates(this, b, backend, f, report, now);
    if (b.explores > 0) this.resetExplores(b, f, report);
    b.lastSampleAt = now;
    b.lastSampleDecision = this.decisions;
    this.sizing.noteLearned();
  }

  /**
   * A backend that served an answer about as fast as the fleet's best would have served it alone
   * (within EXPLORE_RESET of its fits) is tried again after exploreAfterDecisions, not after the
   * backoff it earned while slower: a replica that got faster (its other load ended, an engine
   * restarted) is not left idle for up to 2^exploreBackoff × exploreAfterDecisions decisions. The
   * answer itself decides, not b's fits: those forget its slow past at alpha per sample.
   */
  private resetExplores(b: BackendState, f: Flight, r: CompletionReport): void {
    const out = r.completionTokens ?? f.expectedOut;
    const best = this.bestCost(f.prefillTokens, out);
    if (best === undefined) return;
    if (best !== b) {
      const tookS =
        r.promptEvalMs !== undefined && r.evalMs !== undefined
          ? (r.promptEvalMs + r.evalMs) / 1000
          : (r.finishedAt - r.dispatchedAt) / 1000;
      const bestS = this.rates.prefillS(best, f.prefillTokens) + out * this.rates.decodeS(best, 1);
      if (tookS > bestS * EXPLORE_RESET) return;
    }
    b.explores = 0;
  }

  get defaultSlots(): number {
    return this.p.defaultSlots;
  }

  onBackendRemoved(name: string): void {
    this.picked = undefined;
    this.sizing.noteBackendRemoved();
    this.registry.remove(name);
    this.prefix.removeBackend(name);
    this.affinity?.removeBackend(name);
    this.slotMirror?.removeBackend(name);
  }

  /** What is known of backend `name` (Policy.describe). */
  describe(name: string): Record<string, number> {
    const b = this.registry.get(name);
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
        this.rates.prefillS(b, f.prefillTokens) +
          this.sizing.expectedOf(f) * this.rates.decodeS(b, batch) -
          (this.lastNow - f.dispatchedAt) / 1000,
      );
    }
    out.pendingWorkS = pending;
    const chunks = this.prefix.chunksOf(name);
    if (chunks !== undefined) {
      out.prefixChunks = chunks;
      out.prefixCacheTokens = Math.round(this.prefix.cacheTokensOf(name));
    }
    return out;
  }
}
