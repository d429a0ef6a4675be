/**
 * What a trace importer is: a reader turning one line of a file into a trace entry (the llmlb
 * format's fields: src/workloads/trace-llmlb.ts), or nothing for a header line. Importers are stateful
 * only for CSV headers, so a reader is made per pass over the file.
 */

/** A bad line's field and problem; the caller adds the file and line number. */
export class LineError extends Error {
  constructor(
    readonly field: string | undefined,
    problem: string,
  ) {
    super(problem);
    this.name = 'LineError';
  }
}

/** A bad trace line: `source:line: field: problem`. */
export class TraceError extends Error {
  constructor(
    readonly source: string,
    readonly line: number,
    readonly field: string | undefined,
    problem: string,
  ) {
    super(`${source}:${line}: ${field ? `${field}: ` : ''}${problem}`);
    this.name = 'TraceError';
  }
}

/** One request of a trace, normalized (times in seconds on the trace's own clock). */
export interface TraceEntry {
  readonly at: number;
  readonly outputTokens: number;
  readonly promptTokens?: number | undefined;
  /** Block ids of the prompt (chained or not), `blockTokens` tokens each. */
  readonly blocks?: readonly (string | number)[] | undefined;
  readonly blockTokens?: number | undefined;
  readonly label?: string | undefined;
}

export interface TraceFormat<E extends TraceEntry = TraceEntry> {
  readonly name: string;
  /**
   * Timestamps are wall-clock dates (Azure): the replay starts at the first entry's time.
   * Otherwise times are offsets from the trace's start and kept as they are.
   */
  readonly absoluteTime: boolean;
  /** Whether the first non-blank line of a file looks like this format. */
  detect(firstLine: string): boolean;
  /** A fresh reader: `undefined` for a line that carries no request (a CSV header). */
  reader(): (text: string) => E | undefined;
}

/** A non-negative finite number from a CSV cell, else LineError naming the column. */
export function csvNumber(cell: string | undefined, column: string, integer: boolean): number {
  const v = cell === undefined || cell.trim() === '' ? NaN : Number(cell);
  if (!Number.isFinite(v) || v < 0 || (integer && !Number.isInteger(v)))
    throw new LineError(
      column,
      `expected a non-negative ${integer ? 'integer' : 'number'}, got '${cell ?? ''}'`,
    );
  return v;
}

/**
 * A CSV reader by column names: the header (first line) names the columns, each needed one must be
 * there, in any order; cells are unquoted (the public traces have no commas inside cells).
 */
export function csvReader<E>(
  required: readonly string[],
  row: (cells: readonly string[], col: (name: string) => number | undefined) => E,
): () => (text: string) => E | undefined {
  return () => {
    let index: Map<string, number> | undefined;
    return (text) => {
      const cells = text.split(',');
      if (!index) {
        const m = new Map<string, number>();
        cells.forEach((c, i) => m.set(c.trim().toLowerCase(), i));
        for (const name of required)
          if (!m.has(name.toLowerCase()))
            throw new LineError(undefined, `header lacks column '${name}' (has: ${cells.join(', ')})`);
        index = m;
        return undefined;
      }
      const cols = index;
      if (cells.length < cols.size)
        throw new LineError(undefined, `expected ${cols.size} columns, got ${cells.length}`);
      return row(cells, (name) => cols.get(name.toLowerCase()));
    };
  };
}
