import { formatTable } from '../src/report/table.js';
import type { PipelineResult } from '../src/sim/backlog/simulate.js';

/** One pipeline's figures, as printed side by side. */
export interface Row {
  readonly name: string;
  readonly drainS: number;
  readonly solved: number;
  readonly calls: number;
  readonly wastedCalls: number;
  readonly peakWorkers: number;
  readonly violations: PipelineResult['violations'];
}

export function table(title: string, asIs: Row, llmlb: Row): string {
  const v = (r: Row): string =>
    `${r.violations.total} (${r.violations.requests} req, ${r.violations.tokens} tok, ${r.violations.concurrency} conc)`;
  const rows = [
    [
      'time to drain (model s)',
      asIs.drainS.toFixed(0),
      llmlb.drainS.toFixed(0),
      `${(asIs.drainS / llmlb.drainS).toFixed(2)}× faster`,
    ],
    ['tasks solved', String(asIs.solved), String(llmlb.solved), ''],
    [
      'model calls (wasted)',
      `${asIs.calls} (${asIs.wastedCalls})`,
      `${llmlb.calls} (${llmlb.wastedCalls})`,
      '',
    ],
    ['peak workers', String(asIs.peakWorkers), String(llmlb.peakWorkers), ''],
    ['target violations', v(asIs), v(llmlb), ''],
    [
      'windows × models over target',
      `${asIs.violations.windows} / ${asIs.violations.windowCount}`,
      `${llmlb.violations.windows} / ${llmlb.violations.windowCount}`,
      '',
    ],
  ];
  return `${title}\n${formatTable(['', 'as-is', 'llmlb', 'ratio'], rows)}\n`;
}
