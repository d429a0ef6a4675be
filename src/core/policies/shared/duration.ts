/**
 * Go-style durations as llm-d configs write them ("2m", "1m30s", "500ms", "1h"); a bare number is
 * milliseconds. Throws on anything else, at config load.
 */
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export function parseDurationMs(v: unknown, what: string): number {
  if (typeof v === 'number' && Number.isFinite(v) && v >= 0) return v;
  if (typeof v === 'string') {
    const s = v.trim();
    if (/^\d+(\.\d+)?$/.test(s)) return Number(s);
    const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;
    let total = 0;
    let matched = 0;
    let m: RegExpExecArray | null;
    while ((m = re.exec(s)) !== null) {
      total += Number(m[1]) * UNIT_MS[m[2]!]!;
      matched = re.lastIndex;
    }
    if (matched === s.length && s.length > 0) return total;
  }
  throw new Error(`${what}: expected a duration like "2m", "30s" or "500ms" (got ${JSON.stringify(v)})`);
}
