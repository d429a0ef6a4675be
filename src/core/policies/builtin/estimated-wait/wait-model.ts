import type { BackendState, Cost, Flight, FlightsLoad } from './backend-state.js';
import { heapPush, heapReplaceTop } from './heap.js';
import type { Rates } from './rates.js';

/** A flight's predicted output tokens now (Sizing.expectedOf: re-predicted as the predictor learns). */
export interface FlightOutput {
  expectedOf(f: Flight): number;
}

/**
 * The estimated-wait policy's model of a continuous-batching engine, over one backend's state and
 * the cost it is priced at (its own fits, or the fleet's best: see the estimator's costOf):
 *
 * - batchStepS: the decode step of the batch a new request joins (itself included);
 * - startWait: seconds before it starts — the prompts still in prefill when the engine has room
 *   (prefillWait), else the replay of the in-flight requests FIFO over the slots (slotWait);
 * - delayToOthers: what it adds, summed, to the requests it runs beside.
 *
 * What a backend's flights contribute is kept in its FlightsLoad until its flights, the fits
 * (`fitsVersion`, bumped by fitsChanged), the instant, the cost or the slot count change.
 */
export class WaitModel {
  /** Bumped by each completion learned from, before it changes any fit or the predictor (FlightsLoad). */
  private fitsVersion = 0;
  /** slotWait's min-heap of the times each slot frees (reused: one per call was garbage). */
  private freeAt = new Float64Array(64);

  constructor(
    readonly rates: Rates,
    private readonly sizes: FlightOutput,
  ) {}

  /** Version of the fits and predictions the cached loads were computed with. */
  get fits(): number {
    return this.fitsVersion;
  }

  /** The fits or predictions are about to change: every backend's cached load is stale. */
  fitsChanged(): void {
    this.fitsVersion++;
  }

  /**
   * b's flights-load cache, made current for this estimate: what it holds was computed for the
   * same flights, fits, predictions, instant, cost and slots, or it is emptied and re-keyed.
   */
  loadFor(b: BackendState, now: number, c: Cost, slots: number): FlightsLoad {
    const l = b.load;
    if (
      l.flightsVersion !== b.flightsVersion ||
      l.fitsVersion !== this.fitsVersion ||
      l.now !== now ||
      l.cost !== c ||
      l.slots !== slots
    ) {
      l.flightsVersion = b.flightsVersion;
      l.fitsVersion = this.fitsVersion;
      l.now = now;
      l.cost = c;
      l.slots = slots;
      l.hasWait = false;
      l.hasRemaining = false;
    }
    return l;
  }

  /** Seconds per output token in the batch a new request joins on b (itself included, at most `slots`). */
  batchStepS(b: BackendState, c: Cost, slots: number): number {
    return this.rates.decodeS(c, Math.min(b.flights.length + 1, slots));
  }

  /** Seconds from `now` until a request pushed to b would start there (`step`: batchStepS). */
  startWait(b: BackendState, c: Cost, slots: number, now: number, step: number): number {
    const load = this.loadFor(b, now, c, slots);
    if (!load.hasWait) {
      load.wait =
        b.flights.length < slots ? this.prefillWait(b, c, now) : this.slotWait(b, c, now, slots, step);
      load.hasWait = true;
    }
    return load.wait;
  }

  /**
   * Seconds until the prompts in prefill on b are done: an engine runs a prompt's prefill as one
   * step the whole batch waits on, so a request pushed while earlier prompts are still in prefill
   * starts after them.
   */
  prefillWait(b: BackendState, c: Cost, now: number): number {
    const flights = b.flights;
    let prefilling = 0;
    for (let j = 0; j < flights.length; j++) {
      const f = flights[j]!;
      const left = this.rates.prefillS(c, f.prefillTokens) - (now - f.dispatchedAt) / 1000;
      if (left > prefilling) prefilling = left;
    }
    return prefilling;
  }

  /**
   * All slots busy: seconds until one frees for a new request, replaying the in-flight requests
   * FIFO over `slots` servers (a min-heap of the times each server frees).
   */
  slotWait(b: BackendState, c: Cost, now: number, slots: number, step: number): number {
    const flights = b.flights;
    const n = flights.length;
    if (this.freeAt.length < n) this.freeAt = new Float64Array(n * 2);
    const free = this.freeAt;
    let size = 0;
    for (let i = 0; i < n; i++) {
      const f = flights[i]!;
      const work = this.rates.prefillS(c, f.prefillTokens) + this.sizes.expectedOf(f) * step;
      if (i < slots) {
        // Running: what is left of its expected work (at least a sliver: it has not finished yet).
        heapPush(free, size++, Math.max(work * 0.05, work - (now - f.dispatchedAt) / 1000));
      } else {
        heapReplaceTop(free, size, free[0]! + work);
      }
    }
    return free[0]!;
  }

  /**
   * Seconds a request of `promptTokens` to prefill and `out` output tokens would add, summed, to
   * the requests already running on b (costed at `c` with `slots`): its prefill stalls their
   * batch, its sequence slows each of their decode steps while they overlap.
   */
  delayToOthers(
    b: BackendState,
    c: Cost,
    slots: number,
    now: number,
    promptTokens: number,
    out: number,
  ): number {
    const flights = b.flights;
    const n = flights.length;
    // The others it will run beside: all in flight below the limit; when the engine is full it
    // queues and, once admitted, runs in a full batch (slots - 1 others).
    const k = Math.min(n, slots - 1);
    if (k <= 0) return 0;
    const stall = (c.prefill.slope ?? this.rates.priorPrefillS) * promptTokens;
    const v = c.decode.slope ?? 0;
    const from = Math.ceil(n - k);
    // Queued case: the last k pushed are the ones still running when it is admitted.
    const load = this.loadFor(b, now, c, slots);
    if (!load.hasRemaining) {
      if (load.remaining.length < n) load.remaining = new Float64Array(n * 2);
      const remaining = load.remaining;
      const step = this.rates.decodeS(c, k + 1);
      for (let i = from; i < n; i++) {
        const f = flights[i]!;
        const elapsed =
          n >= slots ? 0 : (now - f.dispatchedAt) / 1000 - this.rates.prefillS(c, f.prefillTokens);
        remaining[i] = Math.max(1, this.sizes.expectedOf(f) - Math.max(0, elapsed) / step);
      }
      load.hasRemaining = true;
    }
    const remaining = load.remaining;
    let overlap = 0;
    for (let i = from; i < n; i++) overlap += Math.min(out, remaining[i]!);
    return k * stall + v * overlap;
  }
}
