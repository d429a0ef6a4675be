import { z } from 'zod';
import { Ema } from '../../estimators/guard.js';
import { OutputLengthModel, type LengthQuery } from '../../estimators/output-length-model.js';
import { splitWall } from '../../estimators/wall-split.js';
import type { BackendView, CompletionReport, RequestClass, RequestInfo } from '../../types.js';

/**
 * What the performance-aware router's routers know about each backend's work (§4.2–4.3): every request this router
 * pushed there and has not seen finish — its prompt tokens, its predicted answer (bucket and
 * expected tokens, from the online output-length predictor) and how far it has likely got — plus
 * the backend's own speed, learned from completions (prefill and decode seconds per token).
 * The request classes LL / LH / HL / HH are per backend, from that speed (§3: heavy prompt ≥ 0.5 s
 * of prefill, heavy decode ≥ 5 s of decode on THAT hardware; both configurable).
 *
 * Pure: times come in as arguments (ms, host clock).
 */
export const WorkloadParams = z.strictObject({
  /** A prompt is heavy if its prefill would take at least this long on the backend (s). */
  heavyPromptS: z.number().positive().default(0.5),
  /** A decode is heavy if it would take at least this long on the backend (s). */
  heavyDecodeS: z.number().positive().default(5),
  /** Prior prefill seconds per prompt token before a backend reports one (the performance-aware router Fig. 4a, V100). */
  priorPrefillS: z.number().positive().default(3.2e-4),
  /** Prior seconds per decode iteration (the performance-aware router §5: 0.02 s, the minimum decode batch time). */
  priorDecodeS: z.number().positive().default(0.02),
  /** Answer-length bucket edges in tokens (the performance-aware router §4.1: 0.5 s and 2 s of decode at 500 tokens/s). */
  bucketEdges: z.array(z.number().int().positive()).min(1).default([250, 1000]),
  /**
   * KV tokens one backend holds (engine profile kvCapacityTokens): max-capacity and min-min check
   * a request's prompt + predicted answer fits beside what is in flight there.
   */
  kvCapacityTokens: z.number().int().positive().default(16384),
  /** EMA smoothing of the learned speeds. */
  alpha: z.number().gt(0).lte(1).default(0.2),
});
export type WorkloadConfig = z.output<typeof WorkloadParams>;

export type { RequestClass };
export const CLASSES: readonly RequestClass[] = ['LL', 'LH', 'HL', 'HH'];

export interface Flight {
  readonly id: string;
  readonly promptTokens: number;
  readonly expectedOut: number;
  readonly bucket: number;
  readonly dispatchedAt: number;
  readonly cls: RequestClass;
  /** The request's features, kept from its prediction to learn from (OutputLengthModel.keep; -1: none). */
  kept: number;
}

/** What the tracker predicts for a request (kept until it is dispatched). */
export interface Prediction {
  readonly bucket: number;
  readonly expectedOut: number;
  readonly promptTokens: number;
  /** The request's features (OutputLengthModel.keep; -1: none), handed on to its flight. */
  kept: number;
}

export interface BackendWork {
  readonly flights: Map<string, Flight>;
  /**
   * The flights again, in the same (dispatch) order, as columns the per-candidate scans read:
   * dispatch time, prompt tokens and expected answer tokens of list[i], for i < list.length.
   */
  readonly list: Flight[];
  at: Float64Array;
  prompt: Float64Array;
  out: Float64Array;
  /**
   * 1 where a scan found the flight's whole predicted answer produced (producedBy = expectedOut).
   * That holds at every later instant until the learned speeds change (the arithmetic is monotone
   * in `now` while the decode time is positive), so later scans skip its division (and
   * remainingTokens the flight: it adds exactly 0). Cleared when a speed is learned, or when asked
   * about an instant before `doneFrom`.
   */
  done: Uint8Array;
  /** The latest instant a flight was marked done at. */
  doneFrom: number;
  readonly prefill: Ema;
  readonly decode: Ema;
  /** Σ promptTokens and Σ expectedOut over flights (kept incrementally). */
  promptTokens: number;
  expectedOut: number;
  /** Flights per class (LL, LH, HL, HH) and per predicted bucket. */
  readonly classCounts: Int32Array;
  readonly bucketCounts: Int32Array;
  /**
   * contextTokens and earliestCompletionS memo: their values at `ctxAt` (NaN: none), valid until
   * the flights change (one pass gives both).
   */
  ctxAt: number;
  ctxValue: number;
  earliestValue: number;
}

/** Approximate prompt tokens of a request: the engine reports real counts later; 4 chars ≈ 1 token. */
export const promptTokensOf = (req: RequestInfo): number => Math.ceil(req.promptText.length / 4);

export class WorkloadTracker {
  readonly cfg: WorkloadConfig;
  readonly predictor: OutputLengthModel;
  private readonly backends = new Map<string, BackendWork>();
  /**
   * Predictions of requests not yet dispatched: a held request is asked about on every pump, so
   * it is predicted once. Bounded (cleared when full) so rejected requests cannot grow it.
   */
  private readonly pending = new Map<string, Prediction>();
  /**
   * Bumped whenever what the tracker answers may change other than by time (a dispatch, a
   * completion, a backend removed): callers may memoise answers per (version, now).
   */
  version = 0;

  constructor(cfg: WorkloadConfig) {
    this.cfg = cfg;
    this.predictor = new OutputLengthModel({ edges: cfg.bucketEdges });
  }

  private query(req: RequestInfo, promptTokens: number): LengthQuery {
    return {
      model: req.model,
      promptTokens,
      maxTokens: req.maxTokens,
      text: req.promptText,
      hint: req.taskHint,
    };
  }

  /**
   * The request's prompt tokens and predicted answer (memoised per request id). Its features are
   * kept with it, and then with its flight, so that learning from its completion does not
   * extract them again (the same features: they are a function of the request alone).
   */
  predict(req: RequestInfo): Prediction {
    let p = this.pending.get(req.id);
    if (!p) {
      p = this.fresh(req);
      this.pending.set(req.id, p);
    }
    return p;
  }

  /** A new prediction for the request (pending is cleared first when full, as predict does). */
  private fresh(req: RequestInfo): Prediction {
    const promptTokens = promptTokensOf(req);
    const predictor = this.predictor;
    const f = predictor.features(this.query(req, promptTokens));
    const r = predictor.predictFeatures(f, req.maxTokens);
    const kept = predictor.keep(f);
    if (this.pending.size >= 65536) {
      for (const q of this.pending.values()) predictor.release(q.kept);
      this.pending.clear();
    }
    return { bucket: r.bucket, expectedOut: r.expectedTokens, promptTokens, kept };
  }

  work(name: string): BackendWork {
    let b = this.backends.get(name);
    if (!b) {
      b = {
        flights: new Map(),
        list: [],
        at: new Float64Array(16),
        done: new Uint8Array(16),
        doneFrom: -Infinity,
        prompt: new Float64Array(16),
        out: new Float64Array(16),
        prefill: new Ema(this.cfg.alpha),
        decode: new Ema(this.cfg.alpha),
        promptTokens: 0,
        expectedOut: 0,
        classCounts: new Int32Array(4),
        bucketCounts: new Int32Array(this.predictor.buckets),
        ctxAt: NaN,
        ctxValue: 0,
        earliestValue: 0,
      };
      this.backends.set(name, b);
    }
    return b;
  }

  prefillS(name: string): number {
    return this.backends.get(name)?.prefill.value ?? this.cfg.priorPrefillS;
  }

  decodeS(name: string): number {
    return this.backends.get(name)?.decode.value ?? this.cfg.priorDecodeS;
  }

  /** LL / LH / HL / HH of a request on a backend, from that backend's learned speed. */
  classOf(promptTokens: number, expectedOut: number, backend: string): RequestClass {
    return this.classAt(promptTokens, expectedOut, this.prefillS(backend), this.decodeS(backend));
  }

  private classAt(
    promptTokens: number,
    expectedOut: number,
    prefillS: number,
    decodeS: number,
  ): RequestClass {
    const hp = promptTokens * prefillS >= this.cfg.heavyPromptS;
    const hd = expectedOut * decodeS >= this.cfg.heavyDecodeS;
    return hp ? (hd ? 'HH' : 'HL') : hd ? 'LH' : 'LL';
  }

  /** The class a dispatched request got on its backend (while in flight there). */
  flightClass(id: string, backend: string): RequestClass | undefined {
    return this.backends.get(backend)?.flights.get(id)?.cls;
  }

  /** Decode tokens a flight has likely produced by `now` (elapsed after its prefill / decode rate). */
  producedBy(f: Flight, backend: string, now: number): number {
    const elapsedS = (now - f.dispatchedAt) / 1000 - f.promptTokens * this.prefillS(backend);
    return elapsedS <= 0 ? 0 : Math.min(f.expectedOut, elapsedS / this.decodeS(backend));
  }

  /** Σ_j (p_j + d_j): prompt and decode tokens the backend's flights hold now (seed Eq. 1–2). */
  contextTokens(name: string, now: number): number {
    const b = this.backends.get(name);
    if (!b) return 0;
    if (b.ctxAt !== now) this.scan(b, now);
    return b.ctxValue;
  }

  /**
   * One pass over a backend's flights at `now`: contextTokens and earliestCompletionS (producedBy's
   * arithmetic inlined, the same operations in the same order). These run for every candidate of
   * every request a router offers.
   */
  private scan(b: BackendWork, now: number): void {
    if (!(now >= b.doneFrom)) this.forgetDone(b);
    const prefill = b.prefill.value ?? this.cfg.priorPrefillS;
    const decode = b.decode.value ?? this.cfg.priorDecodeS;
    const { at, prompt, out, done } = b;
    const n = b.list.length;
    let s = 0;
    let min = Infinity;
    for (let i = 0; i < n; i++) {
      const p = prompt[i]!;
      const e = out[i]!;
      let produced = e;
      if (done[i] === 0) {
        const elapsedS = (now - at[i]!) / 1000 - p * prefill;
        produced = elapsedS <= 0 ? 0 : Math.min(e, elapsedS / decode);
        if (produced === e && e > 0 && decode > 0) {
          done[i] = 1;
          b.doneFrom = now;
        }
      }
      s += p + produced;
      const left = (e - produced) * decode;
      if (left < min) min = left;
    }
    b.ctxAt = now;
    b.ctxValue = s;
    b.earliestValue = n === 0 ? 0 : Math.max(0, min);
  }

  /** The backend's work (made if new) with ctxValue and earliestValue current at `now`. */
  scanned(name: string, now: number): BackendWork {
    const b = this.work(name);
    if (b.ctxAt !== now) this.scan(b, now);
    return b;
  }

  /** Prompt and decode tokens still to process on the backend (seed C.3.1's JSQ measure). */
  remainingTokens(name: string, now: number): number {
    const b = this.backends.get(name);
    if (!b) return 0;
    if (!(now >= b.doneFrom)) this.forgetDone(b);
    const prefill = b.prefill.value ?? this.cfg.priorPrefillS;
    const decode = b.decode.value ?? this.cfg.priorDecodeS;
    const { at, prompt, out, done } = b;
    const n = b.list.length;
    let s = 0;
    for (let i = 0; i < n; i++) {
      // A done flight adds (0) + (e − e) = +0, which leaves s as it is.
      if (done[i] === 1) continue;
      // producedBy, inlined (same arithmetic).
      const p = prompt[i]!;
      const e = out[i]!;
      const elapsedS = (now - at[i]!) / 1000 - p * prefill;
      const d = elapsedS <= 0 ? 0 : Math.min(e, elapsedS / decode);
      if (d === e && d > 0 && decode > 0) {
        done[i] = 1;
        b.doneFrom = now;
      }
      s += (d > 0 ? 0 : p) + (e - d);
    }
    return s;
  }

  private forgetDone(b: BackendWork): void {
    b.done.fill(0);
    b.doneFrom = -Infinity;
  }

  /** KV tokens left once every flight has its whole predicted answer (seed C.3.2's capacity). */
  capacityTokens(name: string): number {
    const b = this.backends.get(name);
    return this.cfg.kvCapacityTokens - (b ? b.promptTokens + b.expectedOut : 0);
  }

  /** KV tokens free on the backend now: kvCapacityTokens less its flights' prompt + generated tokens. */
  freeTokens(name: string, now: number): number {
    return this.cfg.kvCapacityTokens - this.contextTokens(name, now);
  }

  /** The backend can take `need` more tokens of KV now (or is idle: an oversized request cannot starve). */
  fits(name: string, need: number, now: number): boolean {
    // flights(name) === 0 || freeTokens(name, now) >= need, with one lookup.
    const b = this.backends.get(name);
    if (!b || b.flights.size === 0) return true;
    if (b.ctxAt !== now) this.scan(b, now);
    return this.cfg.kvCapacityTokens - b.ctxValue >= need;
  }

  /** In-flight requests on the backend. */
  flights(name: string): number {
    return this.backends.get(name)?.flights.size ?? 0;
  }

  /** Seconds until the backend's flights are likely all done (serially: an upper bound on ready time). */
  earliestCompletionS(name: string, now: number): number {
    const b = this.backends.get(name);
    if (!b || b.list.length === 0) return 0;
    if (b.ctxAt !== now) this.scan(b, now);
    return b.earliestValue;
  }

  onDispatch(req: RequestInfo, backend: BackendView, now: number): void {
    // Predicted when offered, or now (jsq never asks before): it is not pending any longer.
    let p = this.pending.get(req.id);
    if (p) this.pending.delete(req.id);
    else p = this.fresh(req);
    this.version++;
    const b = this.work(backend.name);
    b.ctxAt = NaN;
    const cls = this.classAt(
      p.promptTokens,
      p.expectedOut,
      b.prefill.value ?? this.cfg.priorPrefillS,
      b.decode.value ?? this.cfg.priorDecodeS,
    );
    // The scheduler never dispatches a request twice at once; were it to, the new flight replaces the old.
    const old = b.flights.get(req.id);
    if (old) {
      this.land(b, old);
      this.predictor.release(old.kept);
    }
    const f: Flight = {
      id: req.id,
      promptTokens: p.promptTokens,
      expectedOut: p.expectedOut,
      bucket: p.bucket,
      dispatchedAt: now,
      cls,
      kept: p.kept,
    };
    p.kept = -1;
    b.flights.set(req.id, f);
    const slot = b.list.length;
    if (slot === b.at.length) {
      b.at = grow(b.at);
      const done = new Uint8Array(b.done.length * 2);
      done.set(b.done);
      b.done = done;
      b.prompt = grow(b.prompt);
      b.out = grow(b.out);
    }
    b.list.push(f);
    b.done[slot] = 0;
    b.at[slot] = now;
    b.prompt[slot] = p.promptTokens;
    b.out[slot] = p.expectedOut;
    b.promptTokens += p.promptTokens;
    b.expectedOut += p.expectedOut;
    b.classCounts[CLASSES.indexOf(cls)]!++;
    b.bucketCounts[p.bucket]!++;
  }

  onComplete(req: RequestInfo, backend: BackendView, report: CompletionReport): void {
    const b = this.work(backend.name);
    const f = b.flights.get(req.id);
    this.version++;
    b.ctxAt = NaN;
    const kept = f?.kept ?? -1;
    if (f) this.land(b, f);
    this.learn(req, b, f, kept, report);
    this.predictor.release(kept);
  }

  /** Takes a flight off its backend: the map, the columns (later ones move up) and the sums. */
  private land(b: BackendWork, f: Flight): void {
    b.flights.delete(f.id);
    const { list, at, prompt, out } = b;
    const n = list.length;
    const i = list.indexOf(f);
    list.splice(i, 1);
    at.copyWithin(i, i + 1, n);
    prompt.copyWithin(i, i + 1, n);
    out.copyWithin(i, i + 1, n);
    b.done.copyWithin(i, i + 1, n);
    b.promptTokens -= f.promptTokens;
    b.expectedOut -= f.expectedOut;
    b.classCounts[CLASSES.indexOf(f.cls)]!--;
    b.bucketCounts[f.bucket]!--;
  }

  private learn(
    req: RequestInfo,
    b: BackendWork,
    f: Flight | undefined,
    kept: number,
    report: CompletionReport,
  ): void {
    if (!report.ok) return;
    const prefill = b.prefill.value;
    const decode = b.decode.value;
    const out = report.completionTokens;
    const estimated = f?.promptTokens ?? promptTokensOf(req);
    const promptTokens = report.promptTokens ?? estimated;
    if (out !== undefined && out > 0) {
      // Learn the answer's length (live: eval_count / usage.completion_tokens; simulated: the
      // same), from the features kept since its prediction when there are some.
      if (kept >= 0) this.predictor.observeKept(kept, out);
      else this.predictor.observe(this.query(req, estimated), out);
      if (report.evalMs !== undefined && out > 1) b.decode.update(report.evalMs / 1000 / (out - 1));
      else if (report.firstByteIsWholeAnswer === true) {
        // Non-streamed, wall time only: its first byte is the whole answer (never "decode took 0").
        const s = splitWall(
          (report.finishedAt - report.dispatchedAt - (report.promptEvalMs ?? 0)) / 1000,
          report.promptEvalMs !== undefined ? 0 : promptTokens,
          out,
          prefill ?? this.cfg.priorPrefillS,
          decode ?? this.cfg.priorDecodeS,
        );
        if (s !== undefined) {
          b.decode.update(s.decodeSPerToken);
          if (report.promptEvalMs === undefined && promptTokens > 0 && s.prefillS > 0)
            b.prefill.update(s.prefillS / promptTokens);
        }
      } else if (report.firstByteAt !== undefined && out > 1)
        b.decode.update((report.finishedAt - report.firstByteAt) / 1000 / (out - 1));
    }
    if (report.promptEvalMs !== undefined && promptTokens > 0)
      b.prefill.update(report.promptEvalMs / 1000 / promptTokens);
    // New speeds: what was done by the old ones may not be.
    if (b.prefill.value !== prefill || b.decode.value !== decode) this.forgetDone(b);
  }

  onBackendRemoved(name: string): void {
    this.version++;
    const b = this.backends.get(name);
    if (b) for (const f of b.list) this.predictor.release(f.kept);
    this.backends.delete(name);
  }

  /** Per backend numbers for /admin/backends: in-flight work by class and bucket, learned speed. */
  describe(name: string): Readonly<Record<string, number>> {
    const b = this.backends.get(name);
    if (!b) return {};
    const out: Record<string, number> = {
      inflightPromptTokens: b.promptTokens,
      inflightExpectedOutTokens: Math.round(b.expectedOut),
      prefillMsPerToken: this.prefillS(name) * 1000,
      decodeMsPerToken: this.decodeS(name) * 1000,
      predictorSamples: this.predictor.samples,
    };
    CLASSES.forEach((c, i) => (out[`class${c}`] = b.classCounts[i]!));
    for (let k = 0; k < b.bucketCounts.length; k++) out[`bucket${k}`] = b.bucketCounts[k]!;
    return out;
  }
}

/** A column twice as long, with the old values at its start. */
function grow(a: Float64Array): Float64Array {
  const b = new Float64Array(a.length * 2);
  b.set(a);
  return b;
}
