import type { EngineProfile } from '../engine/types.js';
import type { RequestRecord, RunResult } from './simulator.js';
import { formatTable } from '../report/table.js';

export type RequestClass = 'LL' | 'LH' | 'HL' | 'HH';

/** The performance-aware router §3's thresholds (the workload tracker's heavyPromptS / heavyDecodeS defaults). */
export interface ClassThresholds {
  /** A prompt is heavy when its prefill alone takes at least this long on its backend, s. */
  readonly heavyPromptS: number;
  /** An answer is heavy when decoding it alone takes at least this long on its backend, s. */
  readonly heavyDecodeS: number;
}
export const DEFAULT_CLASS_THRESHOLDS: ClassThresholds = { heavyPromptS: 0.5, heavyDecodeS: 5 };

type Speed = Pick<EngineProfile, 'speed' | 'baseStepS' | 'perSeqS' | 'perTokenS' | 'prefillPerTokenS'>;

/**
 * Classes a finished request by the speed of the backend it ran on (issue #17: "per backend from
 * its own speed"): its prompt's prefill and its answer's decode, each as that backend would take
 * them alone (a batch of one, context growing from the prompt). A request that ran on no backend
 * (or one without a profile) has no class.
 */
export function speedClassifier(
  profiles: ReadonlyMap<string, Speed>,
  t: ClassThresholds = DEFAULT_CLASS_THRESHOLDS,
): (rec: Pick<RequestRecord, 'backend' | 'promptTokens' | 'outputTokens'>) => RequestClass | undefined {
  return (rec) => {
    const p = rec.backend === undefined ? undefined : profiles.get(rec.backend);
    if (p === undefined || !(p.speed > 0)) return undefined;
    const prefillS = (p.baseStepS + p.perSeqS + p.prefillPerTokenS * rec.promptTokens) / p.speed;
    // Σ over the answer's steps of base + one sequence + its context (prompt + tokens so far).
    const n = rec.outputTokens;
    const contextSum = n * rec.promptTokens + (n * (n - 1)) / 2;
    const decodeS = (n * (p.baseStepS + p.perSeqS) + p.perTokenS * contextSum) / p.speed;
    return `${prefillS >= t.heavyPromptS ? 'H' : 'L'}${decodeS >= t.heavyDecodeS ? 'H' : 'L'}` as RequestClass;
  };
}

/**
 * The performance-aware router's per-class view: for each policy and request class (LL / LH / HL / HH; "all" for
 * every request), mean and p90 end-to-end latency, mean TTFT, mean time between tokens, and mean
 * router wait (arrival → dispatch), in seconds. The class is the backend-speed one when a
 * `classify` is given (the simulator knows each backend's profile), else the suffix of a task-mix
 * label `task/CLASS`. Empty when no request has a class.
 */
export function classTable(
  runs: readonly RunResult[],
  classify?: (rec: RequestRecord) => RequestClass | undefined,
): string {
  const rows: string[][] = [];
  const mean = (xs: number[]): number => (xs.length > 0 ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
  const p90 = (xs: number[]): number => {
    if (xs.length === 0) return NaN;
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.ceil(0.9 * s.length) - 1)]!;
  };
  const f = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '-');
  let any = false;
  for (const r of runs) {
    const groups = new Map<string, (typeof r.records)[number][]>([['all', []]]);
    for (const rec of r.records) {
      if (rec.ok !== true) continue;
      groups.get('all')!.push(rec);
      const cls = classify ? classify(rec) : labelClass(rec.label);
      if (cls === undefined) continue;
      any = true;
      let g = groups.get(cls);
      if (!g) groups.set(cls, (g = []));
      g.push(rec);
    }
    for (const cls of ['all', 'LL', 'LH', 'HL', 'HH']) {
      const g = groups.get(cls);
      if (!g || g.length === 0) continue;
      const e2e = g.map((x) => x.finishS! - x.arrivalS);
      const ttft = g.filter((x) => x.firstTokenS !== undefined).map((x) => x.firstTokenS! - x.arrivalS);
      const tbt = g
        .filter((x) => x.firstTokenS !== undefined && x.outputTokens > 1)
        .map((x) => (x.finishS! - x.firstTokenS!) / (x.outputTokens - 1));
      const wait = g.filter((x) => x.dispatchS !== undefined).map((x) => x.dispatchS! - x.arrivalS);
      rows.push([
        r.policy,
        cls,
        String(g.length),
        f(mean(e2e)),
        f(p90(e2e)),
        f(mean(ttft)),
        (mean(tbt) * 1000).toFixed(1),
        f(mean(wait)),
      ]);
    }
  }
  if (!any) return '';
  return formatTable(
    ['policy', 'class', 'done', 'e2e mean', 'e2e p90', 'ttft mean', 'tbt ms', 'router wait'],
    rows,
  );
}

/**
 * The per-class table `simulate` and `llmlb bench` print: only for task-mix workloads (the ones
 * the performance-aware router's classes are about), each request classed by the speed of the fleet backend it ran on.
 */
export function fleetClassTable(
  runs: readonly RunResult[],
  fleet: readonly { readonly name: string; readonly profile: Speed }[],
): string {
  if (!hasTaskClasses(runs)) return '';
  return classTable(runs, speedClassifier(new Map(fleet.map((b) => [b.name, b.profile]))));
}

/** Whether any request carries a task-mix class label (the workloads the performance-aware router's classes are about). */
export function hasTaskClasses(runs: readonly RunResult[]): boolean {
  return runs.some((r) => r.records.some((x) => labelClass(x.label) !== undefined));
}

function labelClass(label: string | undefined): RequestClass | undefined {
  const m = label === undefined ? null : /\/(LL|LH|HL|HH)$/.exec(label);
  return m ? (m[1] as RequestClass) : undefined;
}
