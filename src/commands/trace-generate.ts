/**
 * `llmlb trace generate`: write a prefix-heavy trace (src/workloads/prefix-heavy.ts) as a Mooncake
 * JSONL file, the one a `type: prefix-heavy` workload replays, for `whatif`, `type: trace`
 * scenarios or another tool. A thin shell over the generator: flags in, one file (or stdout) out.
 */
import { writeFileSync } from 'node:fs';
import {
  DEFAULT_DURATION_S,
  prefixHeavyParamsSchema,
  prefixHeavyTraceLines,
  PREFIX_HEAVY_SHAPES,
} from '../workloads/prefix-heavy.js';
import { UsageError } from './usage-error.js';

export interface TraceGenerateOptions {
  readonly shape?: string | undefined;
  readonly rate?: number | undefined;
  readonly durationS?: number | undefined;
  readonly seed?: number | undefined;
  /** Absent: the lines go to stdout. */
  readonly out?: string | undefined;
}

export interface TraceGenerateResult {
  readonly requests: number;
  readonly out: string | undefined;
}

export function runTraceGenerate(o: TraceGenerateOptions): TraceGenerateResult {
  if (o.shape === undefined)
    throw new UsageError(`trace generate needs --shape (${PREFIX_HEAVY_SHAPES.join(' | ')})`);
  const params = { shape: o.shape, rate: o.rate, durationS: o.durationS ?? DEFAULT_DURATION_S };
  const r = prefixHeavyParamsSchema.safeParse(params);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const flag = issue.path[0] === 'durationS' ? 'duration' : String(issue.path[0] ?? 'shape');
    throw new UsageError(`trace generate: --${flag}: ${issue.message}`);
  }
  const lines = prefixHeavyTraceLines(r.data, o.seed ?? 1);
  const text = lines.length > 0 ? lines.join('\n') + '\n' : '';
  if (o.out === undefined) process.stdout.write(text);
  else {
    writeFileSync(o.out, text);
    process.stderr.write(
      `wrote ${lines.length} requests (${r.data.shape}, ${r.data.rate} req/s for ${r.data.durationS} s, Mooncake JSONL) to ${o.out}\n`,
    );
  }
  return { requests: lines.length, out: o.out };
}
