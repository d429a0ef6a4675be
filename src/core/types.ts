/**
 * Types shared by the pure scheduling core, its policies, and the two hosts that drive it
 * (the live router and the simulator). Times are milliseconds on the host's clock; the core
 * never reads a clock itself.
 */

/** Client-facing API family of a request, and the API a backend speaks. */
export type ApiKind = 'ollama' | 'openai';

/**
 * Latest engine-reported load of a backend (scraped /metrics, /api/ps, or a probe). Valid for
 * the call that sees it: a policy copies the numbers it wants to keep, never the object (the
 * simulator refills one object per backend at each probe).
 */
export interface EngineMetrics {
  /** Sequences in the engine's running batch. */
  readonly running: number;
  /** Requests waiting inside the engine (vLLM num_requests_waiting). */
  readonly waiting: number;
  /** KV-cache usage in [0, 1]. */
  readonly kvUsage: number;
  /** Host time the metrics were read. */
  readonly at: number;
  /**
   * Prompt tokens looked up in / found in the engine's prefix cache since it started (vLLM's
   * prefix_cache_queries_total / prefix_cache_hits_total counters), when it exports them.
   */
  readonly prefixCacheQueries?: number | undefined;
  readonly prefixCacheHits?: number | undefined;
  /** LoRA adapters on the engine (vLLM's vllm:lora_requests_info), when it exports them. */
  readonly lora?: LoraMetrics | undefined;
  /** What the engine's prompt cache can hold, when it says (see EngineCacheInfo). */
  readonly cache?: EngineCacheInfo | undefined;
}

/**
 * The engine's prompt-cache capacity as it reports it: vLLM's `vllm:cache_config_info` gauge
 * (block_size × num_gpu_blocks), llama.cpp server's /props (total_slots × default_generation_settings.n_ctx).
 */
export interface EngineCacheInfo {
  /** Prompt tokens the cache can hold in all. */
  readonly tokens: number;
  /**
   * Present when the cache is per slot (llama.cpp): each of `slots` keeps only the last prompt it
   * ran, nothing is shared between slots.
   */
  readonly slots?: number | undefined;
}

/** vLLM's `vllm:lora_requests_info` labels. */
export interface LoraMetrics {
  /** Adapter slots (max_lora). */
  readonly maxLora: number;
  /** Adapters of running requests (running_lora_adapters). */
  readonly running: readonly string[];
  /** Adapters of waiting requests (waiting_lora_adapters). */
  readonly waiting: readonly string[];
}

/** What a backend is, as configured (or added at run time). */
export interface BackendSpec {
  readonly name: string;
  readonly api: ApiKind;
  readonly models: readonly string[];
  /** Cap on requests pushed at once; Infinity when uncapped. */
  readonly maxConcurrency: number;
  readonly weight: number;
  readonly region?: string | undefined;
  /**
   * LoRA adapters it serves (each also in `models`): a request naming one runs on the base model
   * with that adapter, so where it is loaded matters (lora-affinity-scorer, the default's cost).
   */
  readonly adapters?: readonly string[] | undefined;
}

/** The core's read-only view of one backend, handed to policies. */
export interface BackendView {
  readonly name: string;
  /** Position in registration order; stable, used for deterministic tie-breaks. */
  readonly index: number;
  readonly api: ApiKind;
  readonly weight: number;
  readonly maxConcurrency: number;
  readonly region: string | undefined;
  readonly models: ReadonlySet<string>;
  readonly healthy: boolean;
  readonly draining: boolean;
  /** Requests this router pushed to the backend that have not finished yet. */
  readonly inFlight: number;
  readonly metrics: EngineMetrics | undefined;
  /** Models loaded in memory (Ollama /api/ps); undefined when the engine does not say. */
  readonly loadedModels: ReadonlySet<string> | undefined;
  /** LoRA adapters among `models` (BackendSpec.adapters); undefined: none known. */
  readonly adapters?: ReadonlySet<string> | undefined;
  /** Requests this router pushed to the backend since `metrics` was read (0 without metrics). */
  readonly dispatchedSinceMetrics: number;
  /** Requests that ended there since `metrics` was read. */
  readonly completedSinceMetrics: number;
}

/** What the core knows of a request. Output length is never known here (design §3). */
export interface RequestInfo {
  readonly id: string;
  readonly model: string;
  readonly api: ApiKind;
  /** Host time the request reached the router. */
  readonly arrivedAt: number;
  /** Prompt text (chat messages flattened in order). Policies that don't need it ignore it. */
  readonly promptText: string;
  /** Cap on generated tokens the client asked for (num_predict / max_tokens), if any. */
  readonly maxTokens?: number | undefined;
  /** Affinity key (x-session-token header, OpenAI `user`), if any. */
  readonly sessionKey?: string | undefined;
  /**
   * Task hint for the output-length predictor (a configured header, `server.taskHintHeader`, or
   * the simulated workload's task), if any; without it the predictor looks for "This is a <task>
   * task" in the prompt.
   */
  readonly taskHint?: string | undefined;
  /**
   * Its priority in the router queue (InferenceObjective's priority; absent: 0): a held request of
   * higher priority is always offered before one of lower; equal priorities go in the policy's
   * queue order (Policy.queueOrder).
   */
  readonly priority?: number | undefined;
}

/** The performance-aware router's request classes: light/heavy prompt × light/heavy decode, on a given backend. */
export type RequestClass = 'LL' | 'LH' | 'HL' | 'HH';

/**
 * The order held requests are offered in (Policy.queueOrder), the router queue's own slot, apart
 * from picking (as the Gateway API Inference Extension's flow control separates ordering from
 * scheduling). Requests of higher `RequestInfo.priority` always go first; this orders those of
 * equal priority. Absent: FIFO (arrival order).
 */
export type QueueOrder = FifoOrder | ResponseRatioOrder;

/** Arrival order (the default). */
export interface FifoOrder {
  readonly kind: 'fifo';
}

/** The FIFO order, shared. */
export const FIFO: FifoOrder = Object.freeze({ kind: 'fifo' });

/**
 * Highest response ratio first — (waited + size) / size, waited since `arrivedAt` — instead of
 * arrival order (HRRN: short requests are not stuck behind long ones, and every request's ratio
 * grows, so none starves). `size` is the request's predicted service seconds (> 0); the scheduler
 * asks it once per waiting request and again whenever `epoch()` changes, so a policy bumps the
 * epoch when what sizes depend on has changed enough.
 */
export interface ResponseRatioOrder {
  readonly kind: 'response-ratio';
  size(req: RequestInfo): number;
  /**
   * Optional: writes to out[i] what size(reqs[i]) would give, the requests sized one after another
   * in this order (the scheduler sizes every held request again when the epoch moves: hundreds
   * at once, whose common work this may do once).
   */
  sizes?(reqs: readonly RequestInfo[], out: Float64Array): void;
  epoch(): number;
  /**
   * True when any request offered these candidates now would be held on load alone (a pick would
   * return HOLD.load): the scheduler then holds the whole group without ordering it.
   */
  holdsAll?(candidates: readonly BackendView[]): boolean;
}

/**
 * See PolicyTraits.fitGate. The promise: a request the policy held until a change, whose `size` is
 * above `bound(candidates, now)`, would be held again if asked — so the scheduler does not ask it.
 */
export interface FitGate {
  /** The request's size in the policy's unit (KV tokens: prompt + predicted answer); fixed while it waits. */
  size(req: RequestInfo): number;
  /**
   * The largest size one of these candidates would take now (Infinity: any, e.g. one is idle). A
   * dispatch or time passing never raises it (both only add KV in use); a completion may.
   */
  bound(candidates: readonly BackendView[], now: number): number;
}

/**
 * Why `pick` held a request, which says when the scheduler asks it again:
 * - `load`: the hold came from the candidates' load alone (their views: in flight, engine metrics
 *   and the counts since), as selective pushing does — not from the request, the time, or policy
 *   state a dispatch could change — and a dispatch only adds load, so it never lifts such a hold.
 *   The scheduler holds the model's later requests without asking and asks again only when a
 *   backend serving the model changes.
 * - `until-change`: this request's hold stands until a backend serving its model changes — it
 *   depends on the request (its size) and the candidates' state, never on the time passing, and a
 *   dispatch only adds load (kv-fit-filter: fits in no backend's KV). It is not asked again on
 *   every pump (nor, with a fit gate, before it fits); the model's other waiters still are.
 * - `retry`: anything else (the time, policy state): asked again on every pump. The safe answer
 *   when unsure: a wrong `load` or `until-change` silently stops a held request from being asked.
 */
export type HoldReason = 'load' | 'until-change' | 'retry';

/** A held pick (one shared, frozen object per reason: returning one allocates nothing). */
export interface Hold {
  readonly hold: HoldReason;
}

/** The three holds a pick may return. */
export const HOLD: { readonly load: Hold; readonly untilChange: Hold; readonly retry: Hold } = Object.freeze({
  load: Object.freeze({ hold: 'load' }),
  untilChange: Object.freeze({ hold: 'until-change' }),
  retry: Object.freeze({ hold: 'retry' }),
});

/** What `pick` decides: the backend to push to, or a hold with its reason. */
export type PickResult = BackendView | Hold;

/** Whether a pick held its request (one of the HOLD objects). */
export function isHold(r: unknown): r is Hold {
  return r === HOLD.load || r === HOLD.retry || r === HOLD.untilChange;
}

/** The backend a pick chose, or undefined when it held (tests and tools that ignore the reason). */
export function chosen(r: PickResult): BackendView | undefined {
  return isHold(r) ? undefined : r;
}

/**
 * What a policy (or a plugin: PluginTraits) says of itself once, at construction; every field is
 * optional and absent means the cautious answer.
 */
export interface PolicyTraits {
  /**
   * Engine metrics wanted at least this often (ms), e.g. selective pushing on pending requests:
   * the live fleet scrapes and the simulator probes that fast while this policy is in use.
   */
  readonly metricsIntervalMs?: number | undefined;
  /**
   * false: nothing it does reads engine metrics (EngineMetrics, dispatchedSinceMetrics,
   * completedSinceMetrics). With `holds: false` too, setMetrics and a pump with nothing else
   * changed decide nothing new: a host may skip them (the simulator does not probe).
   */
  readonly readsMetrics?: boolean | undefined;
  /** false: it never holds a request (returns a candidate whenever it is given one). */
  readonly holds?: boolean | undefined;
  /**
   * No hold of it reads engine metrics (EngineMetrics and the counts since): a metrics update
   * alone lifts none, so the scheduler asks no held request again for one.
   */
  readonly holdsIgnoreMetrics?: boolean | undefined;
  /**
   * For `until-change` holds because the request fits nowhere: the scheduler asks such a request
   * again only once `bound` of its candidates reaches its `size` (see FitGate). Without it, every
   * such request is asked again at every change — hundreds per completion when a fleet is short
   * of KV.
   */
  readonly fitGate?: FitGate | undefined;
}

/** No traits declared: every answer the cautious one. */
export const NO_TRAITS: PolicyTraits = Object.freeze({});

/**
 * How a pushed request ended, reported back to the core by the host. Valid for the call that
 * sees it: a policy copies what it keeps (the simulator refills one report per run).
 */
export interface CompletionReport {
  /** true when the backend produced a full answer; false on error, timeout or client abort. */
  readonly ok: boolean;
  /** Host time the request was pushed to the backend. */
  readonly dispatchedAt: number;
  /** Host time the first response byte arrived, if any did. */
  readonly firstByteAt?: number | undefined;
  /**
   * true for a non-streamed answer: its first byte is the whole answer, so firstByteAt says
   * nothing about prefill (time to first token). Absent or false: the first byte is the first
   * token (a stream; the simulator's reports).
   */
  readonly firstByteIsWholeAnswer?: boolean | undefined;
  /** Host time the response ended. */
  readonly finishedAt: number;
  /** Tokens the engine reports (Ollama prompt_eval_count / OpenAI usage.prompt_tokens). */
  readonly promptTokens?: number | undefined;
  /** Tokens generated (Ollama eval_count / OpenAI usage.completion_tokens). */
  readonly completionTokens?: number | undefined;
  /** Engine-measured prefill time in ms (Ollama prompt_eval_duration), when the API gives it. */
  readonly promptEvalMs?: number | undefined;
  /** Engine-measured decode time in ms (Ollama eval_duration), when the API gives it. */
  readonly evalMs?: number | undefined;
  /**
   * Prompt tokens the engine found in its prefix cache (OpenAI / vLLM / SGLang
   * usage.prompt_tokens_details.cached_tokens, llama.cpp timings.cache_n), when it says.
   */
  readonly cachedTokens?: number | undefined;
}

/**
 * A routing policy: one file each under core/policies. `pick` chooses among candidates that
 * serve the model, are healthy, not draining, not yet tried for this request, and below their
 * concurrency cap, or holds the request in the router queue (selective pushing) and says why
 * (HOLD.load, HOLD.untilChange, HOLD.retry): the reason decides when the scheduler asks again.
 * The host calls `Scheduler.pump` when state changes so held requests are reconsidered.
 */
export interface Policy {
  readonly name: string;
  /** What it declares of itself once (metrics it reads, whether it holds, its fit gate). */
  readonly traits?: PolicyTraits | undefined;
  /** The order its held requests are offered in (absent: FIFO). */
  readonly queueOrder?: QueueOrder | undefined;
  pick(req: RequestInfo, candidates: readonly BackendView[], now: number): PickResult;
  /** The request was pushed to `backend` (inFlight already counts it). */
  onDispatch?(req: RequestInfo, backend: BackendView, now: number): void;
  /** A pushed request ended (inFlight no longer counts it). */
  onComplete?(req: RequestInfo, backend: BackendView, report: CompletionReport, now: number): void;
  /** A backend left the fleet: forget what is kept about it. */
  onBackendRemoved?(name: string): void;
  /** Numbers worth showing per backend in /admin/backends and /metrics (estimates). */
  describe?(backend: string): Readonly<Record<string, number>>;
  /**
   * The class of a request this policy dispatched and still has in flight there (policies that
   * track workload: /admin/decisions shows it); undefined when it does not know.
   */
  requestClass?(requestId: string, backend: string): RequestClass | undefined;
  /**
   * What decided the last pick, per candidate in its order (estimated-wait: seconds until the
   * request would finish there), for /admin/decisions. Called only when a decision is explained.
   */
  explainLast?(): PickExplanation | undefined;
}

/** Per-policy parameters from YAML; each policy validates its own at construction. */
export type PolicyParams = Readonly<Record<string, unknown>>;

/** What a policy factory receives. `random` is the only source of randomness a policy may use. */
export interface PolicyContext {
  readonly random: () => number;
  readonly params: PolicyParams;
}

export type RejectReason = 'no-backend' | 'queue-full' | 'queue-timeout';

/** What the scheduler tells its host to do. */
export type Decision =
  | { readonly type: 'dispatch'; readonly request: RequestInfo; readonly backend: string }
  | { readonly type: 'reject'; readonly request: RequestInfo; readonly reason: RejectReason };

/** What decided a pick, per candidate in its order (Policy.explainLast). */
export interface PickExplanation {
  readonly name: string;
  readonly scores: readonly number[];
  /** Other per-candidate numbers behind the scores (debug traces). */
  readonly detail?: Readonly<Record<string, readonly number[]>>;
}
