import type { Metric, Registry } from 'prom-client';

/**
 * Counters and histograms for the per-request path. prom-client builds a label object, validates
 * it and hashes it on every `inc`/`observe`, even through `labels(...)` children: a few µs per
 * request. Here a child is resolved once per label set and then only adds numbers; the registry
 * reads them through the same interface as its own metrics, so `/metrics` prints the same text.
 */

type Labels = Record<string, string>;

interface ExportedValue {
  readonly labels: Record<string, string | number>;
  readonly value: number;
  readonly metricName?: string;
}

interface Exported {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'histogram';
  readonly values: ExportedValue[];
  readonly aggregator: 'sum';
}

abstract class FastMetric<C> {
  readonly aggregator = 'sum' as const;
  protected readonly children = new Map<string, { readonly labels: Labels; readonly child: C }>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    // The registry only calls get() and reset(); its typings list prom-client's own classes.
    registry.registerMetric(this as unknown as Metric);
  }

  /** The child for these label values (in labelNames order), created on first use. */
  labels(...values: string[]): C {
    const key = values.length === 1 ? values[0]! : values.join('\u0000');
    let e = this.children.get(key);
    if (!e) {
      if (values.length !== this.labelNames.length)
        throw new Error(`${this.name}: expected ${this.labelNames.length} label values`);
      const labels: Labels = {};
      this.labelNames.forEach((n, i) => (labels[n] = values[i]!));
      e = { labels, child: this.create() };
      this.children.set(key, e);
    }
    return e.child;
  }

  /** Zeroes every child (callers keep their resolved children, so none is dropped). */
  reset(): void {
    for (const { child } of this.children.values()) this.zero(child);
  }

  protected abstract create(): C;
  protected abstract zero(child: C): void;
}

export class CounterChild {
  value = 0;
  inc(by = 1): void {
    if (by >= 0) this.value += by; // negative or NaN: ignored, a counter never goes down
  }
}

export class FastCounter extends FastMetric<CounterChild> {
  readonly type = 'counter' as const;

  protected create(): CounterChild {
    return new CounterChild();
  }

  protected zero(child: CounterChild): void {
    child.value = 0;
  }

  get(): Promise<Exported> {
    const values: ExportedValue[] = [];
    for (const { labels, child } of this.children.values()) values.push({ labels, value: child.value });
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, values, aggregator: 'sum' });
  }
}

export class HistogramChild {
  /** Observations per bucket (not cumulative); the last slot is above every bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: Float64Array) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(v: number): void {
    if (!Number.isFinite(v)) return; // never poison the sum
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }
}

export class FastHistogram extends FastMetric<HistogramChild> {
  readonly type = 'histogram' as const;
  private readonly bounds: Float64Array;

  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    buckets: readonly number[],
    registry: Registry,
  ) {
    super(name, help, labelNames, registry);
    this.bounds = Float64Array.from([...buckets].sort((a, b) => a - b));
  }

  protected create(): HistogramChild {
    return new HistogramChild(this.bounds);
  }

  protected zero(child: HistogramChild): void {
    child.counts.fill(0);
    child.sum = 0;
    child.count = 0;
  }

  get(): Promise<Exported> {
    const values: ExportedValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const { labels, child } of this.children.values()) {
      let cumulative = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += child.counts[i]!;
        values.push({ labels: { le: this.bounds[i]!, ...labels }, value: cumulative, metricName: bucket });
      }
      values.push({ labels: { le: '+Inf', ...labels }, value: child.count, metricName: bucket });
      values.push({ labels, value: child.sum, metricName: `${this.name}_sum` });
      values.push({ labels, value: child.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, values, aggregator: 'sum' });
  }
}
