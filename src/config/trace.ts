/** The `trace:` config key: capture what `serve` routed (src/trace/capture.ts). */
import { z } from 'zod';

const SIZE = /^(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|KiB|MiB|GiB)?$/i;
const UNIT: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
};

/** `100MB`, `64 KiB` or a number of bytes; undefined when malformed. */
export function parseBytes(v: string | number): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) && v > 0 ? Math.floor(v) : undefined;
  const m = SIZE.exec(v.trim());
  if (!m) return undefined;
  const n = Number(m[1]) * UNIT[(m[2] ?? 'b').toLowerCase()]!;
  return n > 0 ? Math.floor(n) : undefined;
}

export const traceConfigSchema = z.strictObject({
  /** JSONL file (its folder is created); rotated files are FILE.1 … FILE.keep. */
  file: z.string().min(1),
  maxBytes: z
    .union([z.string(), z.number()])
    .refine((v) => parseBytes(v) !== undefined, 'a size such as 100MB, 512KiB or a number of bytes')
    .transform((v) => parseBytes(v)!)
    .default(100_000_000),
  keep: z.number().int().min(0).max(1000).default(5),
});

export interface TraceSettings {
  readonly file: string;
  readonly maxBytes: number;
  readonly keep: number;
}
