import { z } from 'zod';
import { Ema } from '../estimators/guard.js';
import { OutputLengthModel, type LengthQuery } from '../estimators/output-length-model.js';
import type { BackendView, CompletionReport, RequestClass, RequestInfo } from '../types.js';

/**
 * What seed 004's routers know about each backend's work (§4.2–4.3): every request this router
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
  /** Prior prefill seconds per prompt token before a backend reports one (seed 004 Fig. 4a, V100). */
  priorPrefillS: z.number().positive().default(3.2e-4),
  /** Prior seconds per decode iteration (seed 004 §5: 0.02 s, the minimum decode batch time). */
  priorDecodeS: z.number().positive().default(0.02),
  /** Answer-length bucket edges in tokens (seed 004 §4.1: 0.5 s and 2 s of decode at 500 tokens/s). */
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
}

export interface BackendWork {
  readonly flights: Map<string, Flight>;
  readonly prefill: Ema;
  readonly decode: Ema;
  /** Σ promptTokens and Σ expectedOut over flights (kept incrementally). */
  promptTokens: number;
  expectedOut: number;
  /** Flights per class (LL, LH, HL, HH) and per predicted bucket. */
  readonly classCounts: Int32Array;
  readonly bucketCounts: Int32Array;
  /** contextTokens memo: its value at `ctxAt` (NaN: none), valid until the flights change. */
  ctxAt: number;
  ctxValue: number;
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
  private readonly pending = new Map<string, { bucket: number; expectedOut: number; promptTokens: number }>();
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

  /** The request's prompt tokens and predicted answer (memoised per request id). */
  predict(req: RequestInfo): { bucket: number; expectedOut: number; promptTokens: number } {
    let p = this.pending.get(req.id);
    if (!p) {
      const promptTokens = promptTokensOf(req);
      const r = this.predictor.predict(this.query(req, promptTokens));
      p = { bucket: r.bucket, expectedOut: r.expectedTokens, promptTokens };
      if (this.pending.size >= 65536) this.pending.clear();
      this.pending.set(req.id, p);
    }
    return p;
  }

  work(name: string): BackendWork {
    let b = this.backends.get(name);
    if (!b) {
      b = {
        flights: new Map(),
        prefill: new Ema(this.cfg.alpha),
        decode: new Ema(this.cfg.alpha),
        promptTokens: 0,
        expectedOut: 0,
        classCounts: new Int32Array(4),
        bucketCounts: new Int32Array(this.predictor.buckets),
        ctxAt: NaN,
        ctxValue: 0,
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
    const hp = promptTokens * this.prefillS(backend) >= this.cfg.heavyPromptS;
    const hd = expectedOut * this.decodeS(backend) >= this.cfg.heavyDecodeS;
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
    if (b.ctxAt === now) return b.ctxValue;
    // producedBy's arithmetic inlined (same operations, same order): this runs for every
    // candidate of every request a router offers.
    const prefill = b.prefill.value ?? this.cfg.priorPrefillS;
    const decode = b.decode.value ?? this.cfg.priorDecodeS;
    let s = 0;
    for (const f of b.flights.values()) {
      const elapsedS = (now - f.dispatchedAt) / 1000 - f.promptTokens * prefill;
      s += f.promptTokens + (elapsedS <= 0 ? 0 : Math.min(f.expectedOut, elapsedS / decode));
    }
    b.ctxAt = now;
    b.ctxValue = s;
    return s;
  }

  /** Prompt and decode tokens still to process on the backend (seed C.3.1's JSQ measure). */
  remainingTokens(name: string, now: number): number {
    const b = this.backends.get(name);
    if (!b) return 0;
    const prefill = b.prefill.value ?? this.cfg.priorPrefillS;
    const decode = b.decode.value ?? this.cfg.priorDecodeS;
    let s = 0;
    for (const f of b.flights.values()) {
      // producedBy, inlined (same arithmetic).
      const elapsedS = (now - f.dispatchedAt) / 1000 - f.promptTokens * prefill;
      const d = elapsedS <= 0 ? 0 : Math.min(f.expectedOut, elapsedS / decode);
      s += (d > 0 ? 0 : f.promptTokens) + (f.expectedOut - d);
    }
    return s;
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
    return this.flights(name) === 0 || this.freeTokens(name, now) >= need;
  }

  /** In-flight requests on the backend. */
  flights(name: string): number {
    return this.backends.get(name)?.flights.size ?? 0;
  }

  /** Seconds until the backend's flights are likely all done (serially: an upper bound on ready time). */
  earliestCompletionS(name: string, now: number): number {
    const b = this.backends.get(name);
    if (!b || b.flights.size === 0) return 0;
    const prefill = b.prefill.value ?? this.cfg.priorPrefillS;
    const decode = b.decode.value ?? this.cfg.priorDecodeS;
    let min = Infinity;
    for (const f of b.flights.values()) {
      // producedBy, inlined (same arithmetic).
      const elapsedS = (now - f.dispatchedAt) / 1000 - f.promptTokens * prefill;
      const left =
        (f.expectedOut - (elapsedS <= 0 ? 0 : Math.min(f.expectedOut, elapsedS / decode))) * decode;
      if (left < min) min = left;
    }
    return Math.max(0, min);
  }

  onDispatch(req: RequestInfo, backend: BackendView, now: number): void {
    const p = this.predict(req);
    this.pending.delete(req.id);
    this.version++;
    const b = this.work(backend.name);
    b.ctxAt = NaN;
    const cls = this.classOf(p.promptTokens, p.expectedOut, backend.name);
    b.flights.set(req.id, {
      id: req.id,
      promptTokens: p.promptTokens,
      expectedOut: p.expectedOut,
      bucket: p.bucket,
      dispatchedAt: now,
      cls,
    });
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
    if (f) {
      b.flights.delete(req.id);
      b.promptTokens -= f.promptTokens;
      b.expectedOut -= f.expectedOut;
      b.classCounts[CLASSES.indexOf(f.cls)]!--;
      b.bucketCounts[f.bucket]!--;
    }
    if (!report.ok) return;
    const out = report.completionTokens;
    const estimated = f?.promptTokens ?? promptTokensOf(req);
    const promptTokens = report.promptTokens ?? estimated;
    if (out !== undefined && out > 0) {
      // Learn the answer's length (live: eval_count / usage.completion_tokens; simulated: the same).
      this.predictor.observe(this.query(req, estimated), out);
      if (report.evalMs !== undefined && out > 1) b.decode.update(report.evalMs / 1000 / (out - 1));
      else if (report.firstByteAt !== undefined && out > 1)
        b.decode.update((report.finishedAt - report.firstByteAt) / 1000 / (out - 1));
    }
    if (report.promptEvalMs !== undefined && promptTokens > 0)
      b.prefill.update(report.promptEvalMs / 1000 / promptTokens);
  }

  onBackendRemoved(name: string): void {
    this.version++;
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
