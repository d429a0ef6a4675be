import { z } from 'zod';
import { Ema } from '../estimators/guard.js';
import { OutputLengthPredictor } from '../estimators/output-length.js';
import type { BackendView, CompletionReport, Policy, PolicyContext, RequestInfo } from '../types.js';
import { parseParams } from './params.js';

/**
 * Our estimated-wait router (the default). For each candidate it predicts when *this* request
 * would finish there, and picks the earliest. It fixes what seed 000's estimate gets wrong:
 *
 * - Rates come from the engine's own durations (Ollama prompt_eval_duration / eval_duration), so
 *   queueing inside the engine does not inflate "time per token"; prefill and decode are
 *   separate rates (a long prompt and a long answer cost differently).
 * - A backend runs `slots` sequences at once: the request waits only if all are busy, and then
 *   for the earliest one to finish — computed from the remaining work of each in-flight request
 *   (its expected tokens minus what has elapsed), not from a character count.
 * - Output length is predicted per model and prompt-length bucket (online), capped by the
 *   client's max tokens.
 * - No winner-takes-all: a backend with no samples, or whose samples went stale while it sat
 *   idle, is costed with the best rates in the fleet, so it is tried (re-measured) when idle.
 *
 * Slots are learned from the engine durations: a request whose wall time matches its engine time
 * did not queue inside the engine, so the backend ran at least as many sequences as were in
 * flight when it was pushed.
 */
const Params = z.strictObject({
  /** EMA smoothing for rates. */
  alpha: z.number().gt(0).lte(1).default(0.2),
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
});

interface Flight {
  readonly dispatchedAt: number;
  readonly promptTokens: number;
  readonly expectedOut: number;
  /** Requests in flight on the backend when this one was pushed (itself excluded). */
  readonly ahead: number;
}

interface Backend {
  readonly prefill: Ema;
  readonly decode: Ema;
  /** Learned lower bound on sequences run at once. */
  slots: number;
  lastSampleAt: number | undefined;
  /** Routing decision count when it last produced a sample. */
  lastSampleDecision: number;
  /** In dispatch order (Map keeps insertion order). */
  readonly flights: Map<string, Flight>;
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
  let cursor = 0;
  let lastNow = 0;
  let decisions = 0;

  const state = (name: string): Backend => {
    let b = backends.get(name);
    if (!b) {
      b = {
        prefill: new Ema(p.alpha),
        decode: new Ema(p.alpha),
        slots: 1,
        lastSampleAt: undefined,
        lastSampleDecision: 0,
        flights: new Map(),
      };
      backends.set(name, b);
    }
    return b;
  };
  const promptTokensOf = (req: RequestInfo): number =>
    Math.max(1, Math.round(req.promptText.length * (tokensPerChar.value ?? p.initialTokensPerChar)));

  /** Best (lowest) rates in the fleet: the optimistic cost of an unmeasured backend. */
  const bestRates = (): { prefill: number; decode: number } => {
    let prefill = Infinity;
    let decode = Infinity;
    for (const b of backends.values()) {
      if (b.prefill.value !== undefined) prefill = Math.min(prefill, b.prefill.value);
      if (b.decode.value !== undefined) decode = Math.min(decode, b.decode.value);
    }
    return {
      prefill: Number.isFinite(prefill) ? prefill : p.priorPrefillS,
      decode: Number.isFinite(decode) ? decode : p.priorDecodeS,
    };
  };

  const slotsOf = (b: Backend, view: BackendView): number => {
    let s = Math.max(b.slots, p.defaultSlots, view.metrics?.running ?? 0);
    if (Number.isFinite(view.maxConcurrency)) s = Math.min(s, view.maxConcurrency);
    return Math.max(1, s);
  };

  const ratesOf = (b: Backend, view: BackendView, now: number, best: { prefill: number; decode: number }) => {
    const stale =
      b.lastSampleAt === undefined ||
      (view.inFlight === 0 && decisions - b.lastSampleDecision >= p.exploreAfterDecisions);
    return stale ? best : { prefill: b.prefill.value ?? best.prefill, decode: b.decode.value ?? best.decode };
  };

  /** Seconds from `now` until the request would finish on this backend. */
  const finishEstimate = (
    b: Backend,
    view: BackendView,
    now: number,
    promptTokens: number,
    out: number,
    best: { prefill: number; decode: number },
  ): number => {
    const r = ratesOf(b, view, now, best);
    const service = promptTokens * r.prefill + out * r.decode;
    const slots = slotsOf(b, view);
    if (b.flights.size < slots) return service;
    // All slots busy: replay the in-flight requests FIFO over `slots` servers (a min-heap of the
    // times each server frees) and see when one frees for this request.
    const free: number[] = [];
    let i = 0;
    for (const f of b.flights.values()) {
      const work = f.promptTokens * r.prefill + f.expectedOut * r.decode;
      if (i < slots) {
        // Running: what is left of its expected work (at least a sliver: it has not finished yet).
        heapPush(free, Math.max(work * 0.05, work - (now - f.dispatchedAt) / 1000));
      } else {
        heapReplaceTop(free, free[0]! + work);
      }
      i++;
    }
    return free[0]! + service;
  };

  const tieBreak = (c: BackendView, chosen: BackendView): boolean => {
    if (c.inFlight !== chosen.inFlight) return c.inFlight < chosen.inFlight;
    const cm = backends.get(c.name)?.lastSampleAt !== undefined;
    const xm = backends.get(chosen.name)?.lastSampleAt !== undefined;
    if (cm !== xm) return !cm;
    return rrBefore(c.index, chosen.index, cursor);
  };

  return {
    name: 'estimated-wait',
    pick(req, candidates, now) {
      lastNow = now;
      const promptTokens = promptTokensOf(req);
      const out = output.predict(req.model, promptTokens, req.maxTokens);
      const best = bestRates();
      let chosen: BackendView | undefined;
      let bestT = Infinity;
      for (const c of candidates) {
        const t = finishEstimate(state(c.name), c, now, promptTokens, out, best);
        // Equal estimates (e.g. nothing known yet): fewer in flight, then an unmeasured backend
        // (to measure it), then round-robin order.
        const better =
          chosen === undefined || t < bestT * (1 - 1e-9) || (t <= bestT * (1 + 1e-9) && tieBreak(c, chosen));
        if (better) {
          chosen = c;
          bestT = t;
        }
      }
      if (chosen) {
        cursor = chosen.index + 1;
        decisions++;
      }
      return chosen;
    },
    estimates(req, candidates, now, out) {
      lastNow = now;
      const promptTokens = promptTokensOf(req);
      const predicted = output.predict(req.model, promptTokens, req.maxTokens);
      const best = bestRates();
      for (let i = 0; i < candidates.length; i++) {
        const c = candidates[i]!;
        out[i] = finishEstimate(state(c.name), c, now, promptTokens, predicted, best);
      }
      decisions++;
    },
    onDispatch(req, backend, now) {
      lastNow = now;
      const b = state(backend.name);
      const promptTokens = promptTokensOf(req);
      b.flights.set(req.id, {
        dispatchedAt: now,
        promptTokens,
        expectedOut: output.predict(req.model, promptTokens, req.maxTokens),
        ahead: b.flights.size,
      });
    },
    onComplete(req, backend, report, now) {
      lastNow = now;
      const b = state(backend.name);
      const f = b.flights.get(req.id);
      if (!f) return;
      b.flights.delete(req.id);
      if (!report.ok) return;
      learn(b, req, f, report, now);
    },
    onBackendRemoved(name) {
      backends.delete(name);
    },
    describe(name) {
      const b = backends.get(name);
      if (!b) return {};
      const out: Record<string, number> = { slots: b.slots, inFlightTracked: b.flights.size };
      if (b.prefill.value !== undefined) out.prefillSPerToken = b.prefill.value;
      if (b.decode.value !== undefined) out.decodeSPerToken = b.decode.value;
      let pending = 0;
      const best = bestRates();
      for (const f of b.flights.values()) {
        const prefill = b.prefill.value ?? best.prefill;
        const decode = b.decode.value ?? best.decode;
        pending += Math.max(
          0,
          f.promptTokens * prefill + f.expectedOut * decode - (lastNow - f.dispatchedAt) / 1000,
        );
      }
      out.pendingWorkS = pending;
      return out;
    },
  };

  function learn(b: Backend, req: RequestInfo, f: Flight, r: CompletionReport, now: number): void {
    const promptTokens = r.promptTokens;
    const outTokens = r.completionTokens;
    if (promptTokens !== undefined && promptTokens > 0 && req.promptText.length > 0) {
      tokensPerChar.update(promptTokens / req.promptText.length);
    }
    if (outTokens !== undefined && outTokens > 0) {
      // A capped answer says little about the natural length; learn only from uncapped ones.
      if (req.maxTokens === undefined || outTokens < req.maxTokens)
        output.observe(req.model, promptTokens ?? f.promptTokens, outTokens);
    }
    const wallS = (r.finishedAt - r.dispatchedAt) / 1000;
    if (r.promptEvalMs !== undefined && r.evalMs !== undefined) {
      // Engine-measured: exact rates, and whether the request queued inside the engine.
      if (promptTokens !== undefined && promptTokens > 0)
        b.prefill.update(r.promptEvalMs / 1000 / promptTokens);
      if (outTokens !== undefined && outTokens > 0) b.decode.update(r.evalMs / 1000 / outTokens);
      const engineS = (r.promptEvalMs + r.evalMs) / 1000;
      // Relative threshold: the gap also holds network and proxy time (ms), and runs may be time-scaled.
      const queued = wallS - engineS > 0.002 + 0.02 * wallS;
      if (!queued) b.slots = Math.max(b.slots, f.ahead + 1);
    } else if (f.ahead < slotsOfLearned(b)) {
      // Wall-clock only, and the request should not have queued: split it at the first byte.
      const first = r.firstByteAt;
      if (first !== undefined && outTokens !== undefined && outTokens > 1 && first < r.finishedAt) {
        if (promptTokens !== undefined && promptTokens > 0)
          b.prefill.update((first - r.dispatchedAt) / 1000 / promptTokens);
        b.decode.update((r.finishedAt - first) / 1000 / (outTokens - 1));
      } else if (outTokens !== undefined && outTokens > 0) {
        const prefillS = (promptTokens ?? 0) * (b.prefill.value ?? 0);
        b.decode.update(Math.max(0, wallS - prefillS) / outTokens);
      }
    }
    b.lastSampleAt = now;
    b.lastSampleDecision = decisions;
  }

  function slotsOfLearned(b: Backend): number {
    return Math.max(b.slots, p.defaultSlots);
  }
}

/** Whether index a comes before index b in round-robin order starting at `cursor`. */
function rrBefore(a: number, b: number, cursor: number): boolean {
  const da = a >= cursor ? a - cursor : a - cursor + 1e9;
  const db = b >= cursor ? b - cursor : b - cursor + 1e9;
  return da < db;
}

function heapPush(h: number[], v: number): void {
  let i = h.length;
  h.push(v);
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (h[p]! <= v) break;
    h[i] = h[p]!;
    i = p;
  }
  h[i] = v;
}

/** Replace the minimum with `v` and restore the heap. */
function heapReplaceTop(h: number[], v: number): void {
  const n = h.length;
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
