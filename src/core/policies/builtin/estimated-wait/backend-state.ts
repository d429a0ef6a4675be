import { LinearFit } from '../../../estimators/linear-fit.js';
import { WallRegression } from '../../../estimators/wall-split.js';
import type { BackendView } from '../../../types.js';

/**
 * What the estimated-wait policy knows of each backend: its fitted rates, the sequences it runs at
 * once, and the requests this router has in flight there. Plain data (the wait model, sizing and
 * learning read and write it), kept by BackendRegistry.
 */

/** A request in flight on a backend, as it was when pushed there. */
export interface Flight {
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

/** Fitted cost of a backend: prefill seconds for a prompt, seconds per output token in a batch. */
export interface Cost {
  readonly prefill: LinearFit;
  readonly decode: LinearFit;
}

/**
 * What a backend's requests in flight add to the estimate of one more request there: the wait
 * before it starts (finishEstimate) and how much of their answers is left (delayToOthers). The
 * same for every request costed there until its flights, the fits or predictions change, or time
 * moves: the picks of one pump (a freed slot lets several held requests go) reuse it rather than
 * walking every flight per candidate per request.
 */
export interface FlightsLoad {
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

export interface BackendState extends Cost {
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
  /** Pushes this router made to it priced at the fleet's best (stale: costOf): each doubles the wait before the next try. */
  explores: number;
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

/** A backend nothing is known of yet; `alpha` is the forgetting rate of its fits. */
export function newBackendState(name: string, alpha: number): BackendState {
  return {
    name,
    // Prompt lengths spread widely in real traffic; a spread of 8 tokens is enough to fit.
    prefill: new LinearFit({ alpha, minSpread: 8, throughOrigin: true }),
    // Batch sizes: half a request of spread before a slope is believed.
    decode: new LinearFit({ alpha, minSpread: 0.5 }),
    wall: new WallRegression(alpha),
    slots: 1,
    queuedAt: Infinity,
    lastSampleAt: undefined,
    lastSampleDecision: 0,
    explores: 0,
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
}

/** Bring the in-flight area up to `now` (call before flights change). */
export function advanceArea(b: BackendState, now: number): void {
  if (now > b.areaAt) b.area += b.flights.length * (now - b.areaAt);
  b.areaAt = Math.max(b.areaAt, now);
}

/** Adds a flight pushed for request `id`; one pushed again under the same id keeps its place (as a Map's set would). */
export function addFlight(b: BackendState, id: string, f: Flight): void {
  const old = b.flightById.get(id);
  if (old !== undefined) b.flights[b.flights.indexOf(old)] = f;
  else b.flights.push(f);
  b.flightsVersion++;
  b.flightById.set(id, f);
}

/** Removes request `id`'s flight and returns it (undefined: none in flight). */
export function removeFlight(b: BackendState, id: string): Flight | undefined {
  const f = b.flightById.get(id);
  if (!f) return undefined;
  b.flightById.delete(id);
  b.flights.splice(b.flights.indexOf(f), 1);
  b.flightsVersion++;
  return f;
}

/** Every backend's state, by name, in insertion order, and by BackendView.index for the hot path. */
export class BackendRegistry {
  private readonly byName = new Map<string, BackendState>();
  /** The states in the same (insertion) order, for the loops that run per decision. */
  readonly list: BackendState[] = [];
  /** Per BackendView.index, its state (a lookup by name cost more than the rest of a candidate's check). */
  private readonly byIndex: (BackendState | undefined)[] = [];

  constructor(private readonly alpha: number) {}

  get(name: string): BackendState | undefined {
    return this.byName.get(name);
  }

  /** The state of backend `name`, made on first sight. */
  state(name: string): BackendState {
    let b = this.byName.get(name);
    if (!b) {
      b = newBackendState(name, this.alpha);
      this.byName.set(name, b);
      this.list.push(b);
    }
    return b;
  }

  /** state(view.name), found by the view's index when it still names the same backend. */
  stateOf(view: BackendView): BackendState {
    const i = view.index;
    const b = this.byIndex[i];
    if (b !== undefined && b.name === view.name) return b;
    const s = this.state(view.name);
    if (Number.isInteger(i) && i >= 0 && i < 65_536) this.byIndex[i] = s;
    return s;
  }

  /** Forgets backend `name`. */
  remove(name: string): void {
    const b = this.byName.get(name);
    if (b === undefined) return;
    this.byName.delete(name);
    this.list.splice(this.list.indexOf(b), 1);
    for (let i = 0; i < this.byIndex.length; i++) if (this.byIndex[i] === b) this.byIndex[i] = undefined;
  }
}
