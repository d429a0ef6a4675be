import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/** Event-loop delay, ms: how late the loop ran a timer due every `resolutionMs`. */
export interface LoopDelay {
  readonly mean: number;
  readonly p99: number;
  readonly max: number;
  /** The sampling period; delays shorter than it are not seen. */
  readonly resolutionMs: number;
}

/** The sampling period: 1 ms, the finest Node takes, so an idle loop reads ~0 ms rather than ~10. */
export const LOOP_DELAY_RESOLUTION_MS = 1;

/**
 * Node's histogram records the time between two runs of its sampling timer, period included (an
 * idle loop sampled every 10 ms reads ~10 ms): the delay is that minus the period.
 */
export function loopDelayOf(
  h: Pick<IntervalHistogram, 'mean' | 'max' | 'percentile' | 'count'>,
  resolutionMs: number,
): LoopDelay {
  const late = (ns: number): number => (h.count > 0 ? Math.max(0, ns / 1e6 - resolutionMs) : 0);
  return { mean: late(h.mean), p99: late(h.percentile(99)), max: late(h.max), resolutionMs };
}

/** Starts sampling now; `read` gives the delay so far, `stop` stops sampling (idempotent). */
export function monitorLoopDelay(resolutionMs = LOOP_DELAY_RESOLUTION_MS): {
  read(): LoopDelay;
  stop(): void;
} {
  const h = monitorEventLoopDelay({ resolution: resolutionMs });
  h.enable();
  return { read: () => loopDelayOf(h, resolutionMs), stop: () => void h.disable() };
}

/** One line for a report: `mean 0.1 ms, p99 1.2 ms, max 8 ms (sampled every 1 ms)`. */
export function formatLoopDelay(d: LoopDelay): string {
  return (
    `mean ${d.mean.toFixed(1)} ms, p99 ${d.p99.toFixed(1)} ms, max ${d.max.toFixed(0)} ms ` +
    `(sampled every ${d.resolutionMs} ms)`
  );
}
