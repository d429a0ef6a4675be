import { Ema } from '../../../estimators/guard.js';
import { LinearFit } from '../../../estimators/linear-fit.js';
import { OutputLengthPredictor } from '../../../estimators/output-length.js';
import { OutputLengthModel } from '../../../estimators/output-length-model.js';
import type { CompletionReport, RequestInfo } from '../../../types.js';
import type { BackendState, Cost, Flight } from './backend-state.js';
import type { Rates } from './rates.js';

/**
 * How big a request is, for the estimated-wait policy: its prompt tokens (from characters, at the
 * token ratio answers reported), its predicted output tokens (per model and prompt-length bucket,
 * or the text-aware model: `outputLength`), and its HRRN size — predicted service seconds on the
 * backend best for it, with predictions calibrated against the answers they were made for.
 */
export interface SizingOptions {
  readonly defaultOutputTokens: number;
  readonly initialTokensPerChar: number;
  readonly outputLength: 'prior' | 'learned';
}

/** Prompt lengths (tokens) below which HRRN sizes are memoised. */
export const SIZE_MEMO = 4096;

interface SizeMemo {
  readonly stamp: Float64Array;
  readonly cap: Float64Array;
  readonly model: (string | undefined)[];
  readonly size: Float64Array;
}

export class Sizing {
  private readonly tokensPerCharEma = new Ema(0.1);
  private readonly output: OutputLengthPredictor;
  private readonly model: OutputLengthModel | undefined;
  /** Learned predictions per request id, made once (bounded: requests that never finish). */
  private readonly learnedOut = new Map<string, number>();
  /**
   * Answer lengths against what was predicted for them: the response-ratio order trusts predicted
   * sizes only as far as they have told answers apart (a slope near 0 — lengths the router cannot
   * foresee — orders held requests by arrival; the performance-aware router's task mix from prompt length alone).
   */
  private readonly calibration = new LinearFit({ alpha: 0.02, minSpread: 8 });
  /** Completions learned from (token ratio, predictor, calibration, fits). */
  private learned = 0;
  /** Bumped by each completion learned from and each backend removed: all a request's size depends on. */
  private sizeStamp = 0;
  /**
   * The last size computed per prompt length (below SIZE_MEMO tokens), with what it was computed
   * for: `sizeStamp` then, the model and the output cap (0: none). Valid while those match.
   */
  private sizeMemo: SizeMemo | undefined;
  /**
   * Version of the HRRN sizes (Policy.queueOrder): bumped when the learning has grown by a
   * sixteenth since the last bump (at least every 64 completions) and when a backend leaves.
   * Sizing every waiting request again at each completion cost more than the rest of the
   * simulation (issue #18); sizes from an untrained predictor are still replaced early (every
   * completion up to 16). Refreshing every 4th-of-growth instead cost heimdall-burst 1–6 %.
   */
  private sizeEpoch = 0;
  private resizeAt = 1;
  /** size() of a request alone (no array per call). */
  private readonly sizeOne: RequestInfo[] = [];
  private readonly sizeOut = new Float64Array(1);
  /** The sampled backends' prefill fits and seconds per output token alone, for sizesOf. */
  private readonly sizePrefill: LinearFit[] = [];
  private sizeDecode1 = new Float64Array(8);

  constructor(
    private readonly opts: SizingOptions,
    private readonly rates: Rates,
  ) {
    this.output = new OutputLengthPredictor(opts.defaultOutputTokens);
    this.model = opts.outputLength === 'learned' ? new OutputLengthModel() : undefined;
  }

  /** Version of the output predictor (a flight predicted at another is re-predicted: expectedOf). */
  get outputVersion(): number {
    return this.output.version;
  }

  /** Version of the HRRN sizes (ResponseRatioOrder.epoch). */
  get epoch(): number {
    return this.sizeEpoch;
  }

  /** Prompt tokens per character, as learned from answers (the initial ratio until then). */
  get tokensPerChar(): number {
    return this.tokensPerCharEma.value ?? this.opts.initialTokensPerChar;
  }

  /** Prompt tokens of a request, from its characters. */
  promptTokensOf(req: RequestInfo): number {
    return Math.max(1, Math.round(req.promptText.length * this.tokensPerChar));
  }

  /**
   * A flight's predicted output, re-predicted once the predictor has learned since: requests pushed
   * before any answer was seen would otherwise keep the default (128 tokens) for their whole life.
   */
  expectedOf(f: Flight): number {
    if (this.model === undefined && f.ver !== this.output.version) {
      f.expectedOut = this.output.predict(f.model, f.promptTokens, f.maxTokens);
      f.ver = this.output.version;
    }
    return f.expectedOut;
  }

  /** Predicted output tokens of a request (the learned predictor: once per request). */
  predictOf(req: RequestInfo, promptTokens: number): number {
    if (this.model === undefined) return this.output.predict(req.model, promptTokens, req.maxTokens);
    let v = this.learnedOut.get(req.id);
    if (v === undefined) {
      v = this.model.predict({
        model: req.model,
        promptTokens,
        maxTokens: req.maxTokens,
        text: req.promptText,
        hint: req.taskHint,
      }).expectedTokens;
      if (this.learnedOut.size >= 65536) this.learnedOut.clear();
      this.learnedOut.set(req.id, v);
    }
    return v;
  }

  /** Predicted service seconds of a request at cost `best` (its HRRN size; the priors without one). */
  sizeOf(promptTokens: number, predicted: number, best: Cost | undefined): number {
    const c = best;
    const out = this.calibration.at(predicted) ?? predicted;
    const t = c
      ? this.rates.prefillS(c, promptTokens) + out * this.rates.decodeS(c, 1)
      : promptTokens * this.rates.priorPrefillS + out * this.rates.priorDecodeS;
    return Math.max(1e-3, t);
  }

  /** sizesOf of one request. */
  size(req: RequestInfo, backends: readonly BackendState[]): number {
    this.sizeOne[0] = req;
    this.sizesOf(this.sizeOne, this.sizeOut, backends);
    return this.sizeOut[0]!;
  }

  /**
   * HRRN sizes (sizeOf at the best of `backends`: Rates.bestCost) of requests, one after another:
   * what does not depend on the request (token ratio, the fits, each backend's decode step alone)
   * read once. Memoised per prompt length until the next completion learned from (sizeMemo).
   */
  sizesOf(reqs: readonly RequestInfo[], out: Float64Array, backends: readonly BackendState[]): void {
    if (this.model !== undefined) {
      for (let i = 0; i < reqs.length; i++) {
        const req = reqs[i]!;
        const promptTokens = this.promptTokensOf(req);
        const predicted = this.predictOf(req, promptTokens);
        out[i] = this.sizeOf(promptTokens, predicted, this.rates.bestCost(backends, promptTokens, predicted));
      }
      return;
    }
    const count = this.readSampled(backends);
    const perChar = this.tokensPerChar;
    const priorPrefillS = this.rates.priorPrefillS;
    const sizePrefill = this.sizePrefill;
    const sizeDecode1 = this.sizeDecode1;
    const memo = (this.sizeMemo ??= {
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
        memo.stamp[promptTokens] === this.sizeStamp &&
        memo.cap[promptTokens] === cap &&
        memo.model[promptTokens] === req.model
      ) {
        out[i] = memo.size[promptTokens]!;
        continue;
      }
      const predicted = this.output.predict(req.model, promptTokens, req.maxTokens);
      // bestCost, with prefillS and decodeS at batch 1 of the best kept for sizeOf.
      let found = false;
      let bestT = Infinity;
      let bestPrefill = 0;
      let bestDecode = 0;
      for (let j = 0; j < count; j++) {
        const prefill = sizePrefill[j]!.at(promptTokens) ?? promptTokens * priorPrefillS;
        const decode = sizeDecode1[j]!;
        const t = prefill + predicted * decode;
        if (t < bestT) {
          bestT = t;
          bestPrefill = prefill;
          bestDecode = decode;
          found = true;
        }
      }
      const o = this.calibration.at(predicted) ?? predicted;
      const size = Math.max(
        1e-3,
        found ? bestPrefill + o * bestDecode : promptTokens * priorPrefillS + o * this.rates.priorDecodeS,
      );
      out[i] = size;
      if (memoised) {
        memo.stamp[promptTokens] = this.sizeStamp;
        memo.cap[promptTokens] = cap;
        memo.model[promptTokens] = req.model;
        memo.size[promptTokens] = size;
      }
    }
  }

  /** Reads bestCost's candidates (the backends with a sample, in its order) into sizePrefill / sizeDecode1; returns their count. */
  private readSampled(backends: readonly BackendState[]): number {
    let count = 0;
    for (let j = 0; j < backends.length; j++) {
      const b = backends[j]!;
      if (b.lastSampleAt === undefined) continue;
      if (count === this.sizeDecode1.length) {
        const grown = new Float64Array(count * 2);
        grown.set(this.sizeDecode1);
        this.sizeDecode1 = grown;
      }
      this.sizePrefill[count] = b.prefill;
      this.sizeDecode1[count] = this.rates.decodeS(b, 1);
      count++;
    }
    return count;
  }

  /**
   * Learns from an answer to `req` (in flight as `f`): the token ratio, the output predictors and
   * the calibration of predictions. A capped answer is censored (its natural length is at least the
   * cap): the predictor counts it apart.
   */
  observe(req: RequestInfo, f: Flight, r: CompletionReport): void {
    const promptTokens = r.promptTokens;
    const outTokens = r.completionTokens;
    if (promptTokens !== undefined && promptTokens > 0 && req.promptText.length > 0) {
      this.tokensPerCharEma.update(promptTokens / req.promptText.length);
    }
    if (outTokens !== undefined && outTokens > 0) {
      this.output.observe(req.model, promptTokens ?? f.promptTokens, outTokens, req.maxTokens);
      // Same prompt tokens as it was asked with (the router's estimate), so features match.
      this.model?.observe(
        {
          model: req.model,
          promptTokens: f.promptTokens,
          maxTokens: req.maxTokens,
          text: req.promptText,
          hint: req.taskHint,
        },
        outTokens,
      );
      this.calibration.update(f.predictedAtPush, outTokens);
    }
  }

  /** A request ended: its learned prediction is no longer needed. */
  forget(id: string): void {
    this.learnedOut.delete(id);
  }

  /** A completion was learned from (after the fits changed): sizes memoised before are stale. */
  noteLearned(): void {
    this.sizeStamp++;
    if (++this.learned >= this.resizeAt) {
      this.sizeEpoch++;
      this.resizeAt = this.learned + Math.min(64, Math.max(1, Math.ceil(this.learned / 16)));
    }
  }

  /** A backend left: bestCost no longer sees it, so sizes memoised with it are stale. */
  noteBackendRemoved(): void {
    this.sizeStamp++;
    this.sizeEpoch++;
  }
}
