/**
 * results.json (design §2): one entry per policy, built the same way from a simulated run and from
 * a live bench, so the two can be compared field by field.
 *
 * "Wait" follows OllamaRouter (Tables 3–4, §6): the request waiting time k6 reports (http_req_waiting:
 * from sending the request to the first response byte), for a non-streamed Ollama call — whose
 * first byte is the whole answer. So wait here is the same end-to-end time as latency (finish −
 * arrival: router queue + engine queue + prefill + decode), not the router-queue time alone; and,
 * as k6 does (§6: "metrics based only on the completed requests"), only completed requests count.
 * (The seed's tables say seconds but their values are milliseconds: 3073 s of completion time
 * cannot hold a 407972 s mean wait. We report seconds.) "Completion time" is makespanS: first
 * arrival to last completion; throughput = completed / makespan (OllamaRouter: 61 / 3073 s).
 */

import { percentile } from './stats.js';

export interface RecordLike {
  readonly id: string;
  readonly label?: string | undefined;
  readonly arrivalS: number;
  readonly firstTokenS?: number | undefined;
  readonly finishS?: number | undefined;
  readonly backend?: string | undefined;
  /** true: completed; false: failed or rejected; undefined: unfinished when the run ended. */
  readonly ok: boolean | undefined;
}

export interface Summary {
  readonly mean: number;
  readonly min: number;
  readonly p50: number;
  readonly p90: number;
  readonly p95: number;
  readonly p99: number;
  readonly max: number;
}

export interface PolicyResult {
  readonly name: string;
  readonly sent: number;
  readonly completed: number;
  /** Rejected by the router, failed by the backend, or given up by the client. */
  readonly failed: number;
  /** Still queued or running when the run ended (durationS + graceS). sent = completed + failed + unfinished. */
  readonly unfinished: number;
  readonly completionRate: number;
  /** From the first arrival to the last completion, s (the OllamaRouter "completion time"). */
  readonly makespanS: number;
  readonly throughputRps: number;
  readonly latencyS: Summary;
  readonly ttftS: Summary;
  readonly prefixHitRate: number | null;
  /** How unevenly requests sat on the backends over time (null: no samples, e.g. one backend). */
  readonly outstandingSpread: OutstandingSpread | null;
  readonly perBackend: readonly { name: string; requests: number; busyS: number; lastFinishS: number }[];
}

/**
 * Spread of outstanding requests (pushed, not finished) across backends, averaged over sample
 * instants taken at a fixed period while anything was outstanding (SkyLB §5.1 reports the
 * variance of outstanding requests across replicas: a prefix-affine policy piles work on a few).
 */
export interface OutstandingSpread {
  /** Instants averaged (those with at least one request outstanding somewhere). */
  readonly samples: number;
  /** Mean outstanding requests per backend. */
  readonly mean: number;
  /** Mean over instants of (most loaded − least loaded backend), requests. */
  readonly maxMinusMin: number;
  /** Mean over instants of the coefficient of variation (population std / mean) across backends. */
  readonly cv: number;
  /** Mean over instants of (most loaded backend / mean): 1 = even, n = all on one of n backends. */
  readonly maxOverMean: number;
  /**
   * Mean requests per backend waiting inside the engine (not admitted: no KV room or slot) — the
   * "pending" requests SP-P keeps at zero; null when the samples do not say.
   */
  readonly pending: number | null;
}

/** One backend's outstanding requests at one instant. */
export interface OutstandingSample {
  readonly t: number;
  readonly backend: string;
  readonly outstanding: number;
  /** Of those, waiting inside the engine (pending), when known. */
  readonly engineWaiting?: number | undefined;
}

/**
 * Spread statistics from samples grouped by instant (`t`); every backend of `backendNames` counts,
 * one missing at an instant counts as 0. Null when fewer than two backends or no busy instant.
 */
export function outstandingSpread(
  samples: readonly OutstandingSample[],
  backendNames: readonly string[],
): OutstandingSpread | null {
  const n = backendNames.length;
  if (n < 2) return null;
  const index = new Map(backendNames.map((b, i) => [b, i]));
  const byT = new Map<number, { out: number[]; waiting: number }>();
  let waitingKnown = samples.length > 0;
  for (const s of samples) {
    const i = index.get(s.backend);
    if (i === undefined) continue;
    let row = byT.get(s.t);
    if (!row) byT.set(s.t, (row = { out: new Array<number>(n).fill(0), waiting: 0 }));
    row.out[i] = s.outstanding;
    if (s.engineWaiting === undefined) waitingKnown = false;
    else row.waiting += s.engineWaiting;
  }
  let count = 0;
  let sumMean = 0;
  let sumGap = 0;
  let sumCv = 0;
  let sumPeak = 0;
  let sumWaiting = 0;
  for (const { out: row, waiting } of byT.values()) {
    let total = 0;
    let max = -Infinity;
    let min = Infinity;
    for (const v of row) {
      total += v;
      if (v > max) max = v;
      if (v < min) min = v;
    }
    if (total <= 0) continue; // idle instants say nothing about balance
    const mean = total / n;
    let sq = 0;
    for (const v of row) sq += (v - mean) ** 2;
    count++;
    sumMean += mean;
    sumGap += max - min;
    sumCv += Math.sqrt(sq / n) / mean;
    sumPeak += max / mean;
    sumWaiting += waiting / n;
  }
  if (count === 0) return null;
  return {
    samples: count,
    mean: r6(sumMean / count),
    maxMinusMin: r6(sumGap / count),
    cv: r6(sumCv / count),
    maxOverMean: r6(sumPeak / count),
    pending: waitingKnown ? r6(sumWaiting / count) : null,
  };
}

/** The exhaustive oracle's bounds (small simulated scenarios only). */
export interface OracleSummary {
  readonly assignments: number;
  readonly bestMeanLatencyS: number;
  readonly bestAssignment: readonly string[];
  readonly worstMeanLatencyS: number;
  readonly worstAssignment: readonly string[];
  /** Expected mean latency of a uniformly random assignment. */
  readonly randomMeanLatencyS: number;
}

export interface Results {
  readonly scenario: string;
  readonly seed: number;
  readonly mode: 'simulate' | 'bench';
  readonly policies: readonly PolicyResult[];
  readonly oracle?: OracleSummary;
}

const r6 = (x: number): number => (Number.isFinite(x) ? Math.round(x * 1e6) / 1e6 : 0);

export function summarize(values: readonly number[]): Summary {
  const s = [...values].sort((a, b) => a - b);
  const mean = s.length === 0 ? 0 : s.reduce((a, b) => a + b, 0) / s.length;
  return {
    mean: r6(mean),
    min: r6(s[0] ?? 0),
    p50: r6(percentile(s, 0.5)),
    p90: r6(percentile(s, 0.9)),
    p95: r6(percentile(s, 0.95)),
    p99: r6(percentile(s, 0.99)),
    max: r6(s[s.length - 1] ?? 0),
  };
}

/** Total time a backend had at least one request outstanding (union of its requests' intervals). */
function busyTime(intervals: [number, number][]): number {
  intervals.sort((a, b) => a[0] - b[0]);
  let busy = 0;
  let start = -Infinity;
  let end = -Infinity;
  for (const [s, e] of intervals) {
    if (s > end) {
      if (end > start) busy += end - start;
      start = s;
      end = e;
    } else end = Math.max(end, e);
  }
  if (end > start) busy += end - start;
  return busy;
}

export function policyResult(
  name: string,
  records: readonly (RecordLike & { dispatchS?: number | undefined })[],
  backendNames: readonly string[],
  prefix: { queries: number; hits: number } | undefined,
  /** Outstanding requests per backend sampled over time (simulator samples, live engine probes). */
  samples?: readonly OutstandingSample[],
): PolicyResult {
  const done = records.filter((r) => r.ok === true && r.finishS !== undefined);
  const failed = records.filter((r) => r.ok === false).length;
  const unfinished = records.filter((r) => r.ok === undefined).length;
  const firstArrival = records.reduce((m, r) => Math.min(m, r.arrivalS), Infinity);
  const lastFinish = done.reduce((m, r) => Math.max(m, r.finishS!), -Infinity);
  const makespan = done.length > 0 ? lastFinish - firstArrival : 0;
  const per = new Map(
    backendNames.map((n) => [n, { requests: 0, intervals: [] as [number, number][], last: 0 }]),
  );
  for (const r of done) {
    const b = r.backend !== undefined ? per.get(r.backend) : undefined;
    if (!b) continue;
    b.requests++;
    b.intervals.push([r.dispatchS ?? r.arrivalS, r.finishS!]);
    b.last = Math.max(b.last, r.finishS!);
  }
  return {
    name,
    sent: records.length,
    completed: done.length,
    failed,
    unfinished,
    completionRate: r6(records.length === 0 ? 1 : done.length / records.length),
    makespanS: r6(makespan),
    throughputRps: r6(makespan > 0 ? done.length / makespan : 0),
    latencyS: summarize(done.map((r) => r.finishS! - r.arrivalS)),
    ttftS: summarize(done.filter((r) => r.firstTokenS !== undefined).map((r) => r.firstTokenS! - r.arrivalS)),
    prefixHitRate: prefix && prefix.queries > 0 ? r6(prefix.hits / prefix.queries) : null,
    outstandingSpread: samples ? outstandingSpread(samples, backendNames) : null,
    perBackend: [...per.entries()].map(([n, b]) => ({
      name: n,
      requests: b.requests,
      busyS: r6(busyTime(b.intervals)),
      lastFinishS: r6(b.last),
    })),
  };
}

/** The oracle's bounds for results.json (structural input: the report does not depend on sim/). */
export function oracleSummary(o: {
  readonly evaluated: number;
  readonly best: { readonly meanLatencyS: number; readonly assignment: readonly string[] };
  readonly worst: { readonly meanLatencyS: number; readonly assignment: readonly string[] };
  readonly randomMeanLatencyS: number;
}): OracleSummary {
  return {
    assignments: o.evaluated,
    bestMeanLatencyS: r6(o.best.meanLatencyS),
    bestAssignment: [...o.best.assignment],
    worstMeanLatencyS: r6(o.worst.meanLatencyS),
    worstAssignment: [...o.worst.assignment],
    randomMeanLatencyS: r6(o.randomMeanLatencyS),
  };
}

/**
 * Stable text: same inputs → byte-identical file. Key order is the construction order above (fixed),
 * numbers are rounded to 6 decimals (r6) so float noise below a microsecond never shows.
 */
export function resultsJson(results: Results): string {
  return JSON.stringify(results, null, 2) + '\n';
}
