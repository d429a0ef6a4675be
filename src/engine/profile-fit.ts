/**
 * Engine profiles fitted to what was measured: least squares, and per-backend profiles from a
 * captured trace (`llmlb profile --trace`). The engine model these fit (design §3): an iteration
 * costs base + perSeq·running + perToken·context (+ prefillPerToken·prompt for the one admitting a
 * prompt), so every quantity is linear in what a probe or a trace varies.
 */
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { EngineProfile } from './types.js';

/** The fitted constants: the EngineProfile fields a probe can measure. */
export type MeasuredConstants = Pick<
  EngineProfile,
  'slots' | 'speed' | 'baseStepS' | 'perSeqS' | 'perTokenS' | 'prefillPerTokenS'
>;

/** Ordinary least squares y = a + b·x. */
export function linearFit(xs: readonly number[], ys: readonly number[]): { a: number; b: number } {
  const n = xs.length;
  if (n === 0) return { a: 0, b: 0 };
  const mx = xs.reduce((s, x) => s + x, 0) / n;
  const my = ys.reduce((s, y) => s + y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i]! - mx) * (ys[i]! - my);
    sxx += (xs[i]! - mx) ** 2;
  }
  const b = sxx > 0 ? sxy / sxx : 0;
  return { a: my - b * mx, b };
}

/** One backend's profile derived from a captured trace. */
export interface TraceBackendProfile {
  readonly requests: number;
  readonly profile: MeasuredConstants;
  /** Most requests seen in flight at once on it. */
  readonly maxConcurrency: number;
}

interface Obs {
  readonly startS: number;
  readonly firstS: number;
  readonly endS: number;
  readonly promptTokens: number;
  readonly outputTokens: number;
}

/**
 * Per-backend profiles from an llmlb capture (`trace: { file }` in serve's config): successful
 * lines with a backend, a TTFT and an E2E. TTFT = base + (perToken + prefill)·prompt fits prefill;
 * a request's mean decode step (E2E − TTFT)/(output − 1) against the mean number of requests on
 * the same backend during its decode fits base and per-sequence cost. perTokenS is not separable
 * from a trace and is left out. Bad JSON → Error naming the line.
 */
export async function profilesFromTrace(path: string): Promise<Map<string, TraceBackendProfile>> {
  const by = new Map<string, Obs[]>();
  const lines = createInterface({ input: createReadStream(path), crlfDelay: Infinity });
  let no = 0;
  for await (const raw of lines) {
    no++;
    const line = raw.trim();
    if (line === '') continue;
    let v: Record<string, unknown>;
    try {
      v = JSON.parse(line) as Record<string, unknown>;
    } catch {
      throw new Error(`${path}:${no}: not JSON`);
    }
    const { backend, at, ttftS, e2eS, promptTokens, outputTokens, status } = v;
    if (
      typeof backend !== 'string' ||
      typeof at !== 'number' ||
      typeof ttftS !== 'number' ||
      typeof e2eS !== 'number' ||
      typeof promptTokens !== 'number' ||
      typeof outputTokens !== 'number' ||
      (status !== undefined && status !== 200)
    )
      continue;
    let list = by.get(backend);
    if (!list) by.set(backend, (list = []));
    list.push({ startS: at, firstS: at + ttftS, endS: at + e2eS, promptTokens, outputTokens });
  }
  const out = new Map<string, TraceBackendProfile>();
  for (const [name, obs] of by) {
    const pf = linearFit(
      obs.map((o) => o.promptTokens),
      obs.map((o) => o.firstS - o.startS),
    );
    // Requests on this backend in flight at time t: starts ≤ t minus ends ≤ t (binary search).
    const starts = obs.map((o) => o.startS).sort((a, b) => a - b);
    const ends = obs.map((o) => o.endS).sort((a, b) => a - b);
    const upTo = (xs: readonly number[], t: number): number => {
      let lo = 0;
      let hi = xs.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (xs[mid]! <= t) lo = mid + 1;
        else hi = mid;
      }
      return lo;
    };
    const inFlight = (t: number): number => upTo(starts, t) - upTo(ends, t);
    const xs: number[] = [];
    const ys: number[] = [];
    let maxConcurrency = 1;
    for (const o of obs) {
      maxConcurrency = Math.max(maxConcurrency, inFlight(o.startS));
      if (o.outputTokens < 2 || !(o.endS > o.firstS)) continue;
      // Mean concurrency over its decode, sampled at 5 points.
      let c = 0;
      for (let k = 0; k < 5; k++) c += inFlight(o.firstS + ((k + 0.5) / 5) * (o.endS - o.firstS));
      xs.push(c / 5);
      ys.push((o.endS - o.firstS) / (o.outputTokens - 1));
    }
    const step = linearFit(xs, ys);
    const baseStepS = Math.max(0, step.a);
    const perSeqS = Math.max(0, step.b);
    out.set(name, {
      requests: obs.length,
      maxConcurrency,
      profile: {
        slots: maxConcurrency,
        speed: 1,
        baseStepS,
        perSeqS,
        perTokenS: 0,
        prefillPerTokenS: Math.max(0, pf.b),
      },
    });
  }
  return out;
}
