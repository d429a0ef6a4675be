/**
 * A one-line progress bar for a terminal (what cli-progress gave `llmlb bench`, in a few lines):
 * redrawn in place with a carriage return, at most every `everyMs`, and ended with a newline.
 */
export interface ProgressBar {
  update(done: number, total: number): void;
  stop(): void;
}

export interface ProgressOptions {
  readonly width?: number;
  readonly everyMs?: number;
  /** Injected for tests. */
  readonly clock?: () => number;
}

/** The line itself: `label [████░░░░] 3 done / 8 sent | 12s`. */
export function progressLine(
  label: string,
  done: number,
  total: number,
  elapsedMs: number,
  width = 30,
): string {
  const frac = total > 0 ? Math.min(1, Math.max(0, done / total)) : 0;
  const full = Math.round(frac * width);
  const bar = '\u2588'.repeat(full) + '\u2591'.repeat(width - full);
  return `${label} [${bar}] ${done} done / ${total} sent | ${Math.floor(elapsedMs / 1000)}s`;
}

export function progressBar(
  label: string,
  out: { write(s: string): unknown },
  opts: ProgressOptions = {},
): ProgressBar {
  const clock = opts.clock ?? Date.now;
  const everyMs = opts.everyMs ?? 100;
  const started = clock();
  let drawnAt = -Infinity;
  let last = { done: 0, total: 0 };
  const draw = (): void => {
    drawnAt = clock();
    out.write(`\r${progressLine(label, last.done, last.total, drawnAt - started, opts.width)}`);
  };
  return {
    update(done, total) {
      last = { done, total };
      if (clock() - drawnAt >= everyMs) draw();
    },
    stop() {
      draw();
      out.write('\n');
    },
  };
}
