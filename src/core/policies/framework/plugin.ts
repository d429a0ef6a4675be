import type {
  BackendView,
  CompletionReport,
  Hold,
  HoldReason,
  PolicyParams,
  PickExplanation,
  PolicyTraits,
  QueueOrder,
  RequestClass,
  RequestInfo,
} from '../../types.js';

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
  /** Plugins this one reads: the profile runs their hooks too, even when they are not in it. */
  readonly uses?: readonly Plugin[];
  /**
   * What it declares of itself, in a policy's vocabulary (PolicyTraits): metricsIntervalMs,
   * readsMetrics (false: a profile of such plugins needs no probes), holds (a picker: false when
   * it never holds), holdsIgnoreMetrics, fitGate (it holds exactly the requests whose size is above
   * the candidates' bound); a filter also says what its empty result means (`hold`).
   */
  readonly traits?: PluginTraits | undefined;
}

/** PolicyTraits, plus a filter's hold reason. */
export interface PluginTraits extends PolicyTraits {
  /**
   * A filter: why an empty result holds the request (HoldReason; absent: 'retry'). `load` when
   * the answer depends only on each candidate's view (not the request or the time) and keeps no
   * more backends as their load grows; `until-change` when it depends on the request too but
   * stands until a candidate changes.
   */
  readonly hold?: HoldReason | undefined;
}

/** A picker's traits when it never holds and reads no engine metrics (most do). */
export const NEVER_HOLDS: PluginTraits = Object.freeze({ holds: false, readsMetrics: false });

/** Drops backends. An empty result holds the request in the router queue (selective pushing). */
export interface Filter extends PluginHooks {
  readonly kind: 'filter';
  /** The plugin type, as written in YAML (`queue-scorer`, …). */
  readonly type: string;
  /** The instance name (defaults to the type). */
  readonly name: string;
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
 * order (max-score-picker's maxNumOfEndpoints); or holds the request with its reason (HOLD; an
 * empty list is HOLD.retry). A picker that never holds says so: traits.holds false.
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
  ): readonly BackendView[] | Hold;
  /** A whole-decision policy's own numbers for the last pick (Policy.explainLast). */
  explainLast?(): PickExplanation | undefined;
  /** The order it wants waiting requests offered in (Policy.queueOrder). */
  readonly queueOrder?: QueueOrder | undefined;
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
