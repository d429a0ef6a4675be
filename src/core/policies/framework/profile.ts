import { HOLD, isHold } from '../../types.js';
import type {
  BackendView,
  CompletionReport,
  Hold,
  PickResult,
  Policy,
  PolicyTraits,
  QueueOrder,
  RequestClass,
  RequestInfo,
} from '../../types.js';
import type { Filter, Picker, Plugin, ScoreExplanation, Scorer } from './plugin.js';

/** A scorer with the weight its profile gives it. */
export interface WeightedScorer {
  readonly scorer: Scorer;
  readonly weight: number;
}

/** What a dynamic-weight rule watches (computed over the candidates, or over recent completions). */
export type WeightSignal =
  /** The most requests waiting inside any candidate's engine (scraped, corrected by pushes). */
  | 'maxEngineWaiting'
  /** The most requests this router has in flight at any candidate. */
  | 'maxInFlight'
  /** Spread of in-flight counts across candidates (max − min). */
  | 'inFlightSpread'
  /** Share of the last `window` completions whose time to first byte exceeded `ttftSloMs`. */
  | 'ttftSloMissRatio';

/**
 * Heimdall, key feature 2: weights that follow the traffic. While `signal` is above `above`, the
 * listed scorers get the given weights (later rules override earlier ones); below it, the
 * profile's own weights apply again. `below` adds hysteresis: once on, a rule stays on until the
 * signal drops under it.
 */
export interface DynamicWeightRule {
  readonly signal: WeightSignal;
  readonly above: number;
  readonly below?: number | undefined;
  /** Scorer name → weight while the rule is on. */
  readonly set: Readonly<Record<string, number>>;
  /** For ttftSloMissRatio. */
  readonly ttftSloMs?: number | undefined;
  readonly window?: number | undefined;
}

export interface ProfileDefinition {
  readonly name: string;
  readonly filters: readonly Filter[];
  readonly scorers: readonly WeightedScorer[];
  readonly picker: Picker;
  readonly dynamicWeights?: readonly DynamicWeightRule[] | undefined;
}

const NOTHING: readonly BackendView[] = Object.freeze([]);

/** Fallbacks remembered per request for retries; bounded so abandoned requests cannot grow it. */
const MAX_REMEMBERED = 4096;

interface RuleState {
  readonly rule: DynamicWeightRule;
  on: boolean;
  /** Ring of recent TTFT misses (1) and hits (0), for ttftSloMissRatio. */
  readonly recent: Uint8Array | undefined;
  filled: number;
  next: number;
  misses: number;
}

/**
 * A scheduling profile run as a Policy: filters in order (an empty result holds the request, which
 * is how selective pushing waits), then every scorer, a weighted sum, and the picker. The picker's
 * extra endpoints are kept as the request's retry order: when the router retries it elsewhere, the
 * next remembered backend that is still a candidate goes first.
 */
export class ProfilePolicy implements Policy {
  readonly name: string;
  /**
   * metricsIntervalMs: the least its plugins want. holdsIgnoreMetrics: its filters' holds read no
   * engine metrics and its picker never holds or its holds read none. readsMetrics: some plugin or
   * dynamic-weight rule may read them. holds: it has a filter, or a picker that may hold.
   * fitGate: that of the one plugin that can hold — the picker's when there are no filters, or a
   * lone filter's when the picker never holds; none otherwise.
   */
  readonly traits: PolicyTraits;
  /** The picker's queue order (estimated-wait: response ratio), if it has one. */
  readonly queueOrder: QueueOrder | undefined;
  /** Set by the host to receive each decision's scores (debug log, /admin/decisions). */
  explain: ((e: ScoreExplanation, req: RequestInfo) => void) | undefined;
  private readonly filters: readonly Filter[];
  private readonly scorers: readonly WeightedScorer[];
  private readonly weights: Float64Array;
  private readonly picker: Picker;
  private readonly rules: RuleState[];
  private readonly plugins: readonly Plugin[];
  private readonly fallbacks = new Map<string, readonly string[]>();
  /**
   * Per filter: the hold its empty result means, given the filters before it (each may have
   * narrowed what it saw): `load` while every filter so far holds on load alone, `until-change`
   * while every one holds on load or until a change, else `retry`.
   */
  private readonly filterHolds: readonly Hold[];
  /**
   * A picker's hold of each reason as the profile's: it stands only when every filter's would
   * (a picker's `load` stands as `load` only behind filters that all hold on load, its
   * `until-change` only behind filters that all hold until a change; else `retry`).
   */
  private readonly pickerLoad: Hold;
  private readonly pickerUntilChange: Hold;
  /** Score buffers, and views of them sized to the last candidate count (subarray allocates). */
  private scratchBuffer = new Float64Array(16);
  private totalsBuffer = new Float64Array(16);
  private scratch = new Float64Array(0);
  private totals = new Float64Array(0);

  constructor(def: ProfileDefinition) {
    this.name = def.name;
    this.filters = def.filters;
    const filterHolds: Hold[] = [];
    let allLoad = true;
    let allUntilChange = true;
    for (const f of def.filters) {
      const h = f.traits?.hold;
      if (h !== 'load') allLoad = false;
      if (h !== 'load' && h !== 'until-change') allUntilChange = false;
      filterHolds.push(allLoad ? HOLD.load : allUntilChange ? HOLD.untilChange : HOLD.retry);
    }
    this.filterHolds = filterHolds;
    this.pickerLoad = allLoad ? HOLD.load : HOLD.retry;
    this.pickerUntilChange = allUntilChange ? HOLD.untilChange : HOLD.retry;
    const pickerHolds = def.picker.traits?.holds !== false;
    this.scorers = def.scorers;
    this.weights = Float64Array.from(def.scorers, (s) => s.weight);
    this.picker = def.picker;
    this.queueOrder = def.picker.queueOrder;
    this.rules = (def.dynamicWeights ?? []).map((rule) => {
      const size = rule.signal === 'ttftSloMissRatio' ? (rule.window ?? 50) : 0;
      return {
        rule,
        on: false,
        recent: size > 0 ? new Uint8Array(size) : undefined,
        filled: 0,
        next: 0,
        misses: 0,
      };
    });
    // One instance may sit in several roles (a scorer another plugin reads): call its hooks once.
    const own: Plugin[] = [...def.filters, ...def.scorers.map((s) => s.scorer), def.picker];
    this.plugins = [...new Set<Plugin>([...own.flatMap((p) => p.uses ?? []), ...own])];
    const wanted = this.plugins.flatMap((p) =>
      p.traits?.metricsIntervalMs === undefined ? [] : [p.traits.metricsIntervalMs],
    );
    const readsMetrics = !(
      this.plugins.every((p) => p.traits?.readsMetrics === false) &&
      this.rules.every((r) => r.rule.signal !== 'maxEngineWaiting')
    );
    const holds = def.filters.length > 0 || pickerHolds;
    const fitGate =
      def.filters.length === 0
        ? def.picker.traits?.fitGate
        : def.filters.length === 1 && !pickerHolds
          ? def.filters[0]!.traits?.fitGate
          : undefined;
    this.traits = Object.freeze({
      metricsIntervalMs: wanted.length > 0 ? Math.min(...wanted) : undefined,
      holdsIgnoreMetrics:
        def.filters.every((f) => f.traits?.holdsIgnoreMetrics === true) &&
        (!pickerHolds || def.picker.traits?.holdsIgnoreMetrics === true),
      readsMetrics,
      holds,
      fitGate,
    });
  }

  /** Every plugin the profile runs hooks for (benches and tests inspect their state). */
  get allPlugins(): readonly Plugin[] {
    return this.plugins;
  }

  /** The weights in force now, by scorer name (after dynamic rules). */
  currentWeights(): Record<string, number> {
    const out: Record<string, number> = {};
    this.scorers.forEach((s, i) => (out[s.scorer.name] = this.weights[i]!));
    return out;
  }

  pick(req: RequestInfo, candidates: readonly BackendView[], now: number): PickResult {
    let c = candidates;
    for (let i = 0; i < this.filters.length; i++) {
      const f = this.filters[i]!;
      c = f.filter(req, c, now);
      if (c.length === 0) {
        this.explain?.(
          { profile: this.name, backends: [], scorers: [], totals: [], picked: [], heldBy: f.name },
          req,
        );
        return this.filterHolds[i]!;
      }
    }
    const retry = this.fallbacks.size > 0 ? this.fallbacks.get(req.id) : undefined;
    if (retry) {
      for (const name of retry) {
        const b = c.find((x) => x.name === name);
        if (b) return b;
      }
    }
    const n = c.length;
    if (this.totals.length !== n) {
      if (this.totalsBuffer.length < n) {
        this.totalsBuffer = new Float64Array(n * 2);
        this.scratchBuffer = new Float64Array(n * 2);
      }
      this.totals = this.totalsBuffer.subarray(0, n);
      this.scratch = this.scratchBuffer.subarray(0, n);
    }
    const totals = this.totals.fill(0);
    const scratch = this.scratch;
    if (this.rules.length > 0) this.applyRules(c, now);
    const detail: { name: string; weight: number; scores: number[] }[] | undefined = this.explain
      ? []
      : undefined;
    for (let s = 0; s < this.scorers.length; s++) {
      const w = this.weights[s]!;
      if (w === 0 && !detail) continue;
      scratch.fill(0);
      this.scorers[s]!.scorer.score(req, c, now, scratch);
      for (let i = 0; i < n; i++) {
        // A scorer bug must not turn into NaN routing: clamp into [0, 1].
        const v = scratch[i]!;
        const x = v > 0 ? (v < 1 ? v : 1) : 0;
        totals[i]! += w * x;
        scratch[i] = x;
      }
      detail?.push({ name: this.scorers[s]!.scorer.name, weight: w, scores: Array.from(scratch) });
    }
    const answer = this.picker.pick(req, c, totals, now);
    const picked = isHold(answer) ? NOTHING : answer;
    if (detail) {
      // A whole-decision picker (estimated-wait) scores nothing here: show its own numbers.
      const own = this.picker.explainLast?.();
      if (own) detail.push({ name: own.name, weight: 0, scores: [...own.scores] });
    }
    if (detail)
      this.explain!(
        {
          profile: this.name,
          backends: c.map((b) => b.name),
          scorers: detail,
          totals: Array.from(totals),
          picked: picked.map((b) => b.name),
        },
        req,
      );
    if (picked.length === 0) {
      // A picker's hold may depend on the request or the time, unless it says it does not; and
      // only filters that hold on load alone (or until a change) may have narrowed what it saw.
      if (answer === HOLD.load) return this.pickerLoad;
      if (answer === HOLD.untilChange) return this.pickerUntilChange;
      return HOLD.retry;
    }
    if (picked.length > 1) {
      if (this.fallbacks.size >= MAX_REMEMBERED) this.fallbacks.delete(this.fallbacks.keys().next().value!);
      this.fallbacks.set(
        req.id,
        picked.slice(1).map((b) => b.name),
      );
    }
    return picked[0]!;
  }

  onDispatch(req: RequestInfo, backend: BackendView, now: number): void {
    for (const p of this.plugins) p.onDispatch?.(req, backend, now);
  }

  onComplete(req: RequestInfo, backend: BackendView, report: CompletionReport, now: number): void {
    if (report.ok) this.fallbacks.delete(req.id);
    for (const r of this.rules) if (r.recent) recordTtft(r, req, report);
    for (const p of this.plugins) p.onComplete?.(req, backend, report, now);
  }

  onBackendRemoved(name: string): void {
    for (const p of this.plugins) p.onBackendRemoved?.(name);
  }

  requestClass(requestId: string, backend: string): RequestClass | undefined {
    for (const p of this.plugins) {
      const c = p.requestClass?.(requestId, backend);
      if (c !== undefined) return c;
    }
    return undefined;
  }

  /** The picker's own numbers for its last pick (a whole-decision picker: estimated-wait). */
  explainLast(): ReturnType<NonNullable<Picker['explainLast']>> {
    return this.picker.explainLast?.();
  }

  describe(backend: string): Readonly<Record<string, number>> {
    let out: Record<string, number> | undefined;
    for (const p of this.plugins) {
      const d = p.describe?.(backend);
      if (d) out = { ...out, ...d };
    }
    return out ?? {};
  }

  private applyRules(c: readonly BackendView[], now: number): void {
    let changed = false;
    for (const r of this.rules) {
      const v = signal(r, c, now);
      const on = r.on ? v > (r.rule.below ?? r.rule.above) : v > r.rule.above;
      if (on !== r.on) {
        r.on = on;
        changed = true;
      }
    }
    if (!changed) return;
    this.scorers.forEach((s, i) => (this.weights[i] = s.weight));
    for (const r of this.rules) {
      if (!r.on) continue;
      this.scorers.forEach((s, i) => {
        const w = r.rule.set[s.scorer.name];
        if (w !== undefined) this.weights[i] = w;
      });
    }
  }
}

function signal(r: RuleState, c: readonly BackendView[], now: number): number {
  switch (r.rule.signal) {
    case 'ttftSloMissRatio':
      return r.filled === 0 ? 0 : r.misses / r.filled;
    case 'maxInFlight':
    case 'inFlightSpread': {
      let max = 0;
      let min = Infinity;
      for (const b of c) {
        if (b.inFlight > max) max = b.inFlight;
        if (b.inFlight < min) min = b.inFlight;
      }
      return r.rule.signal === 'maxInFlight' ? max : max - min;
    }
    case 'maxEngineWaiting': {
      let max = 0;
      for (const b of c) {
        const m = b.metrics;
        if (!m) continue;
        const w = Math.max(0, m.waiting + b.dispatchedSinceMetrics - b.completedSinceMetrics);
        if (w > max) max = w;
      }
      void now;
      return max;
    }
  }
}

function recordTtft(r: RuleState, req: RequestInfo, report: CompletionReport): void {
  const ring = r.recent!;
  // A whole (non-streamed) answer shows no time to first token: its wall time would be a false miss.
  if (report.ok && report.firstByteIsWholeAnswer === true) return;
  const first = report.firstByteAt ?? (report.ok ? report.finishedAt : undefined);
  // A request that failed before any byte counts as a miss: the client waited and got nothing.
  const miss = first === undefined || first - req.arrivedAt > (r.rule.ttftSloMs ?? Infinity) ? 1 : 0;
  if (r.filled === ring.length) r.misses -= ring[r.next]!;
  else r.filled++;
  ring[r.next] = miss;
  r.misses += miss;
  r.next = (r.next + 1) % ring.length;
}
