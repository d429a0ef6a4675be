/**
 * Inference half of a small multilayer perceptron: ReLU hidden layers, linear output. The core's
 * `rl` policy only evaluates a trained network; training (gradients, Adam) extends this class in
 * src/rl/mlp.ts, so the core never imports the layer above it. Pure; the forward pass allocates
 * nothing (activations live in buffers made once).
 */
export interface MlpJson {
  readonly sizes: readonly number[];
  /** Per layer: weights row-major [out][in], then biases [out]. */
  readonly layers: readonly { readonly w: readonly number[]; readonly b: readonly number[] }[];
}

export class MlpNet {
  readonly sizes: readonly number[];
  /** Per layer l: w[l] is out×in row-major, b[l] is out. */
  readonly w: Float64Array[];
  readonly b: Float64Array[];
  /** Activations per layer (a[0] = input), kept from the last forward (training reads them). */
  protected readonly a: Float64Array[];

  /** All weights zero; fill them (fromJSON, or a trainer's initialisation). */
  constructor(sizes: readonly number[]) {
    if (sizes.length < 2 || sizes.some((s) => !(Number.isInteger(s) && s > 0)))
      throw new RangeError('mlp: sizes must be >= 2 positive integers');
    this.sizes = [...sizes];
    const L = sizes.length - 1;
    this.w = Array.from({ length: L }, (_, l) => new Float64Array(sizes[l]! * sizes[l + 1]!));
    this.b = Array.from({ length: L }, (_, l) => new Float64Array(sizes[l + 1]!));
    this.a = sizes.map((s) => new Float64Array(s));
  }

  /** Output for `x` (a view reused by the next call). */
  forward(x: ArrayLike<number>): Float64Array {
    const a0 = this.a[0]!;
    for (let i = 0; i < a0.length; i++) a0[i] = x[i]!;
    return this.run();
  }

  /** Output for the input row `x[off .. off + sizes[0])` of a packed matrix (no copy of x kept). */
  forwardAt(x: Float64Array, off: number): Float64Array {
    const a0 = this.a[0]!;
    for (let i = 0; i < a0.length; i++) a0[i] = x[off + i]!;
    return this.run();
  }

  /**
   * For scoring many rows that share their first `g` inputs: the first layer's pre-activation
   * from those inputs alone (with its bias), computed once per decision instead of once per row.
   * Then `forwardRest` scores each row from its remaining inputs.
   */
  prepareShared(x: Float64Array, g: number): void {
    const nin = this.sizes[0]!;
    const nout = this.sizes[1]!;
    const w = this.w[0]!;
    const b = this.b[0]!;
    const pre = this.pre.length === nout ? this.pre : (this.pre = new Float64Array(nout));
    for (let o = 0; o < nout; o++) {
      let s = b[o]!;
      const row = o * nin;
      for (let i = 0; i < g; i++) s += w[row + i]! * x[i]!;
      pre[o] = s;
    }
    this.shared = g;
  }

  /** Output for the row at `x[off ..]` whose first inputs are those given to prepareShared. */
  forwardRest(x: Float64Array, off: number): Float64Array {
    const relu = this.sizes.length > 2;
    layer(this.w[0]!, this.pre, x, off, this.shared, this.sizes[0]!, this.sizes[1]!, this.a[1]!, relu);
    return this.run(1);
  }

  private pre = new Float64Array(0);
  private shared = 0;

  private run(from = 0): Float64Array {
    const L = this.sizes.length - 1;
    for (let l = from; l < L; l++)
      layer(
        this.w[l]!,
        this.b[l]!,
        this.a[l]!,
        0,
        0,
        this.sizes[l]!,
        this.sizes[l + 1]!,
        this.a[l + 1]!,
        l < L - 1,
      );
    return this.a[L]!;
  }

  toJSON(): MlpJson {
    return {
      sizes: this.sizes,
      layers: this.w.map((w, l) => ({ w: Array.from(w), b: Array.from(this.b[l]!) })),
    };
  }

  /** Copy weights from another net of the same shape. */
  copyFrom(o: MlpNet): void {
    for (let l = 0; l < this.w.length; l++) {
      this.w[l]!.set(o.w[l]!);
      this.b[l]!.set(o.b[l]!);
    }
  }

  /** Load a JSON document's weights into `into` (its sizes must match `j.sizes`); clear errors. */
  protected static load<T extends MlpNet>(j: unknown, make: (sizes: number[]) => T): T {
    const bad = (why: string): never => {
      throw new Error(`mlp weights: ${why}`);
    };
    if (!j || typeof j !== 'object') bad('not an object');
    const o = j as { sizes?: unknown; layers?: unknown };
    if (!Array.isArray(o.sizes) || o.sizes.length < 2 || !o.sizes.every((s) => Number.isInteger(s) && s > 0))
      bad('sizes must be an array of >= 2 positive integers');
    const sizes = o.sizes as number[];
    if (!Array.isArray(o.layers) || o.layers.length !== sizes.length - 1) bad('layers must match sizes');
    const m = make(sizes);
    (o.layers as unknown[]).forEach((layer, l) => {
      const { w, b } = (layer ?? {}) as { w?: unknown; b?: unknown };
      if (!Array.isArray(w) || w.length !== m.w[l]!.length || !w.every(Number.isFinite))
        bad(`layer ${l}: w must be ${m.w[l]!.length} finite numbers`);
      if (!Array.isArray(b) || b.length !== m.b[l]!.length || !b.every(Number.isFinite))
        bad(`layer ${l}: b must be ${m.b[l]!.length} finite numbers`);
      m.w[l]!.set(w as number[]);
      m.b[l]!.set(b as number[]);
    });
    return m;
  }

  /** Rebuild from JSON; throws a clear Error on a malformed document. */
  static fromJSON(j: unknown): MlpNet {
    return MlpNet.load(j, (sizes) => new MlpNet(sizes));
  }
}

/**
 * One layer: out[o] = init[o] + Σ w[o · nin + i] · x[off + i] over i from `from` to nin − 1, added in
 * that order, then ReLU when `relu`. Four outputs at a time: their sums are independent chains
 * that overlap, where one output's additions alone would each wait for the last (the same
 * operations in the same order for every output, so the same values).
 */
function layer(
  w: Float64Array,
  init: Float64Array,
  x: Float64Array,
  off: number,
  from: number,
  nin: number,
  nout: number,
  out: Float64Array,
  relu: boolean,
): void {
  let o = 0;
  for (; o + 4 <= nout; o += 4) {
    let s0 = init[o]!;
    let s1 = init[o + 1]!;
    let s2 = init[o + 2]!;
    let s3 = init[o + 3]!;
    const r0 = o * nin;
    const r1 = r0 + nin;
    const r2 = r1 + nin;
    const r3 = r2 + nin;
    for (let i = from; i < nin; i++) {
      const v = x[off + i]!;
      s0 += w[r0 + i]! * v;
      s1 += w[r1 + i]! * v;
      s2 += w[r2 + i]! * v;
      s3 += w[r3 + i]! * v;
    }
    out[o] = relu && s0 < 0 ? 0 : s0;
    out[o + 1] = relu && s1 < 0 ? 0 : s1;
    out[o + 2] = relu && s2 < 0 ? 0 : s2;
    out[o + 3] = relu && s3 < 0 ? 0 : s3;
  }
  for (; o < nout; o++) {
    let s = init[o]!;
    const row = o * nin;
    for (let i = from; i < nin; i++) s += w[row + i]! * x[off + i]!;
    out[o] = relu && s < 0 ? 0 : s;
  }
}
