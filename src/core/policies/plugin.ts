import type {
  BackendView,
  CompletionReport,
  FitGate,
  PolicyParams,
  RequestClass,
  RequestInfo,
  ResponseRatioOrder,
} from '../types.js';

/**
 * Scheduling plugins (Heimdall, after llm-d's Endpoint Picker): a profile runs its filters in
 * order, then every scorer, sums the weighted scores, and lets its picker choose. A built-in
 * policy is a profile too (one scorer and a picker), so there is one mechanism.
 *
 * Plugins are pure like the rest of the core: `now` is passed in, `random` is the only source of
 * randomness. Each plugin validates its parameters once, at construction.
 */

/** Lifecycle hooks any plugin may implement (the same ones a Policy has). */
export interface PluginHooks {
  /** The request was pushed to `backend` (inFlight already counts it). */
  onDispatch?(req: RequestInfo, backend: BackendView, now: number): void;
  /** A pushed request ended (inFlight no longer counts it). */
  onComplete?(req: RequestInfo, backend: BackendView, report: CompletionReport, now: number): void;
  /** A backend left the fleet: forget what is kept about it. */
  onBackendRemoved?(name: string): void;
  /** Numbers worth showing per backend (estimates), merged into /admin/backends. */
  describe?(backend: string): Readonly<Record<string, number>>;
  /** A dispatched request's class on its backend (Policy.requestClass), when the plugin tracks it. */
  requestClass?(requestId: string, backend: string): RequestClass | undefined;
  /** Engine metrics wanted at least this often (ms) while in use: hosts probe/scrape that fast. */
  readonly metricsIntervalMs?: number;
  /** Plugins this one reads: the profile runs their hooks too, even when they are not in it. */
  readonly uses?: readonly Plugin[];
  /**
   * false: nothing it does reads engine metrics (BackendView.metrics, dispatchedSinceMetrics,
   * completedSinceMetrics), so a profile of such plugins needs no probes (Policy.readsMetrics).
   * Absent: it may read them.
   */
  readonly readsMetrics?: boolean;
}

/** Drops backends. An empty result holds the request in the router queue (selective pushing). */
export interface Filter extends PluginHooks {
  readonly kind: 'filter';
  /** The plugin type, as written in YAML (`queue-scorer`, …). */
  readonly type: string;
  /** The instance name (defaults to the type). */
  readonly name: string;
  /**
   * True when the answer depends only on each candidate's view (not the request or the time) and
   * keeps no more backends as their load grows: a hold from it stands until one of them changes,
   * so the scheduler need not ask again for every waiting request (Policy.heldByLoad).
   */
  readonly byLoad?: boolean;
  /** Its holds stand until a candidate changes, though they depend on the request (Policy.heldUntilChange). */
  readonly untilChange?: boolean;
  /** It reads no engine metrics (Policy.holdsIgnoreMetrics). */
  readonly ignoresMetrics?: boolean;
  /**
   * It holds exactly the requests whose size is above the candidates' bound (Policy.fitGate):
   * kv-fit-filter, a request that fits in no backend's KV.
   */
  readonly fitGate?: FitGate | undefined;
  filter(req: RequestInfo, candidates: readonly BackendView[], now: number): readonly BackendView[];
}

/** Scores each candidate in [0, 1]; higher means lighter / better. */
export interface Scorer extends PluginHooks {
  readonly kind: 'scorer';
  readonly type: string;
  readonly name: string;
  /** Writes candidate i's score into out[i] (out.length === candidates.length, zero-filled). */
  score(req: RequestInfo, candidates: readonly BackendView[], now: number, out: Float64Array): void;
}

/**
 * Chooses among scored candidates. Returns the chosen backend first, then fallbacks in retry
 * order (max-score-picker's maxNumOfEndpoints); an empty list holds the request.
 */
export interface Picker extends PluginHooks {
  readonly kind: 'picker';
  readonly type: string;
  readonly name: string;
  pick(
    req: RequestInfo,
    candidates: readonly BackendView[],
    scores: Float64Array,
    now: number,
  ): readonly BackendView[];
  /** A whole-decision policy's own numbers for the last pick (Policy.explainLast). */
  explainLast?(): { readonly name: string; readonly scores: readonly number[] } | undefined;
  /** Its last hold came from the candidates' load alone (Policy.heldByLoad). */
  heldByLoad?(): boolean;
  /** It never holds a request (returns at least one candidate whenever it is given one). */
  readonly neverHolds?: boolean;
  /** Its last hold stands until a candidate changes (Policy.heldUntilChange). */
  heldUntilChange?(): boolean;
  /** None of its holds reads engine metrics (Policy.holdsIgnoreMetrics). */
  readonly holdsIgnoreMetrics?: boolean | undefined;
  /** A request it held is held again while its size is above the candidates' bound (Policy.fitGate). */
  readonly fitGate?: FitGate | undefined;
  /** The order it wants waiting requests offered in (Policy.responseRatio). */
  readonly responseRatio?: ResponseRatioOrder | undefined;
}

export type Plugin = Filter | Scorer | Picker;

/** What a plugin factory receives. */
export interface PluginContext {
  /** The instance name (YAML `name`, else the type). */
  readonly name: string;
  readonly params: PolicyParams;
  readonly random: () => number;
  /** Another plugin of the same config by name (no-hit-lru-scorer reads its prefix scorer). */
  lookup(name: string): Plugin | undefined;
}

export type PluginFactory = (ctx: PluginContext) => Plugin;

/** Per-request view a profile passes to `explain` consumers (debug log, /admin/decisions). */
export interface ScoreExplanation {
  readonly profile: string;
  /** Candidates after filtering, in the order scored. */
  readonly backends: readonly string[];
  /** Per scorer: its name, current weight, and a score per backend (same order). */
  readonly scorers: readonly {
    readonly name: string;
    readonly weight: number;
    readonly scores: readonly number[];
  }[];
  readonly totals: readonly number[];
  /** Chosen backend first, then fallbacks; empty when held. */
  readonly picked: readonly string[];
  /** The filter that left no candidate, when one held the request. */
  readonly heldBy?: string | undefined;
}
