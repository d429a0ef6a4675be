/**
 * Target violations as the models see them: each call's start, end and tokens, cut into one-minute
 * windows. A violation is one (window, model, kind) where the model got more than its target:
 * requests or tokens started in the window above requestsPerMinute / tokensPerMinute, or in-flight
 * calls above maxConcurrent at any instant of the window.
 */
import type { ModelTargets } from './scenario.js';

export interface CallRecord {
  readonly model: string;
  readonly startMs: number;
  readonly endMs: number;
  readonly tokens: number;
}

export interface Violations {
  readonly requests: number;
  readonly tokens: number;
  readonly concurrency: number;
  readonly total: number;
  /** Windows (of all windows × models) with at least one violation. */
  readonly windows: number;
  readonly windowCount: number;
  /** Highest in-flight count seen per model. */
  readonly peakConcurrency: Record<string, number>;
}

export function countViolations(
  calls: readonly CallRecord[],
  limits: Readonly<Record<string, ModelTargets>>,
  windowMs = 60_000,
  originMs = 0,
): Violations {
  const per = new Map<
    string,
    { reqs: Map<number, number>; toks: Map<number, number>; conc: Map<number, number> }
  >();
  const peak: Record<string, number> = {};
  let last = originMs;
  const byModel = new Map<string, CallRecord[]>();
  for (const c of calls) {
    if (!byModel.has(c.model)) byModel.set(c.model, []);
    byModel.get(c.model)!.push(c);
    last = Math.max(last, c.endMs);
  }
  const win = (t: number): number => Math.floor((t - originMs) / windowMs);
  for (const [model, cs] of byModel) {
    const s = {
      reqs: new Map<number, number>(),
      toks: new Map<number, number>(),
      conc: new Map<number, number>(),
    };
    per.set(model, s);
    for (const c of cs) {
      const w = win(c.startMs);
      s.reqs.set(w, (s.reqs.get(w) ?? 0) + 1);
      s.toks.set(w, (s.toks.get(w) ?? 0) + c.tokens);
    }
    // Sweep starts and ends; an end at the same instant as a start frees the slot first.
    const ev: [number, number][] = [];
    for (const c of cs) ev.push([c.startMs, 1], [c.endMs, -1]);
    ev.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let cur = 0;
    let pk = 0;
    let prevWin = 0;
    for (const [t, d] of ev) {
      // Calls still running when a window opens count in that window too.
      const w0 = win(t);
      for (let w = prevWin + 1; w <= w0; w++) s.conc.set(w, Math.max(s.conc.get(w) ?? 0, cur));
      prevWin = Math.max(prevWin, w0);
      cur += d;
      if (d > 0) {
        const w = win(t);
        s.conc.set(w, Math.max(s.conc.get(w) ?? 0, cur));
        pk = Math.max(pk, cur);
      }
    }
    peak[model] = pk;
  }
  let requests = 0;
  let tokens = 0;
  let concurrency = 0;
  let windows = 0;
  const windowCount = win(last) + 1;
  for (const [model, s] of per) {
    const l = limits[model];
    if (!l) continue;
    for (let w = 0; w < windowCount; w++) {
      const r = (s.reqs.get(w) ?? 0) > l.requestsPerMinute;
      const t = (s.toks.get(w) ?? 0) > l.tokensPerMinute;
      const c = (s.conc.get(w) ?? 0) > l.maxConcurrent;
      requests += r ? 1 : 0;
      tokens += t ? 1 : 0;
      concurrency += c ? 1 : 0;
      windows += r || t || c ? 1 : 0;
    }
  }
  return {
    requests,
    tokens,
    concurrency,
    total: requests + tokens + concurrency,
    windows,
    windowCount: windowCount * Object.keys(limits).length,
    peakConcurrency: peak,
  };
}
