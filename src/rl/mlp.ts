/**
 * A small multilayer perceptron with ReLU hidden layers and a linear output, trained with Adam —
 * hand-written (no native ML dependency) and deterministic under a seed: weights are drawn from
 * the given generator (He initialisation), and nothing else is random. Sized for seed 004's
 * router (27 → 64 → 64 → 5, Appendix C.10.3): a forward pass is ~6k multiply-adds.
 */
export interface MlpJson {
  readonly sizes: readonly number[];
  /** Per layer: weights row-major [out][in], then biases [out]. */
  readonly layers: readonly { readonly w: readonly number[]; readonly b: readonly number[] }[];
}

export class Mlp {
  readonly sizes: readonly number[];
  /** Per layer l: w[l] is out×in row-major, b[l] is out. */
  readonly w: Float64Array[];
  readonly b: Float64Array[];
  /** Activations per layer (a[0] = input), kept from the last forward for backward. */
  private readonly a: Float64Array[];
  /** Gradient accumulators. */
  readonly gw: Float64Array[];
  readonly gb: Float64Array[];
  private readonly delta: Float64Array[];
  // Adam state.
  private readonly mw: Float64Array[];
  private readonly vw: Float64Array[];
  private readonly mb: Float64Array[];
  private readonly vb: Float64Array[];
  private t = 0;

  constructor(sizes: readonly number[], random: () => number) {
    if (sizes.length < 2 || sizes.some((s) => !(Number.isInteger(s) && s > 0)))
      throw new RangeError('mlp: sizes must be >= 2 positive integers');
    this.sizes = [...sizes];
    const L = sizes.length - 1;
    const mk = (f: (l: number) => number): Float64Array[] =>
      Array.from({ length: L }, (_, l) => new Float64Array(f(l)));
    this.w = mk((l) => sizes[l]! * sizes[l + 1]!);
    this.b = mk((l) => sizes[l + 1]!);
    this.gw = mk((l) => sizes[l]! * sizes[l + 1]!);
    this.gb = mk((l) => sizes[l + 1]!);
    this.mw = mk((l) => sizes[l]! * sizes[l + 1]!);
    this.vw = mk((l) => sizes[l]! * sizes[l + 1]!);
    this.mb = mk((l) => sizes[l + 1]!);
    this.vb = mk((l) => sizes[l + 1]!);
    this.a = sizes.map((s) => new Float64Array(s));
    this.delta = sizes.map((s) => new Float64Array(s));
    for (let l = 0; l < L; l++) {
      // He init with a Box–Muller normal from the seeded generator.
      const scale = Math.sqrt(2 / sizes[l]!);
      const w = this.w[l]!;
      for (let i = 0; i < w.length; i++) {
        const u = Math.max(random(), 1e-12);
        w[i] = scale * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
      }
    }
  }

  /** Output for `x` (a view reused by the next call). */
  forward(x: ArrayLike<number>): Float64Array {
    const L = this.sizes.length - 1;
    const a0 = this.a[0]!;
    for (let i = 0; i < a0.length; i++) a0[i] = x[i]!;
    for (let l = 0; l < L; l++) {
      const nin = this.sizes[l]!;
      const nout = this.sizes[l + 1]!;
      const w = this.w[l]!;
      const b = this.b[l]!;
      const inp = this.a[l]!;
      const out = this.a[l + 1]!;
      for (let o = 0; o < nout; o++) {
        let s = b[o]!;
        const row = o * nin;
        for (let i = 0; i < nin; i++) s += w[row + i]! * inp[i]!;
        out[o] = l < L - 1 && s < 0 ? 0 : s; // ReLU on hidden layers
      }
    }
    return this.a[L]!;
  }

  /** Accumulate ∂loss/∂θ given ∂loss/∂output of the LAST forward (call forward first). */
  backward(dOut: ArrayLike<number>): void {
    const L = this.sizes.length - 1;
    const dL = this.delta[L]!;
    for (let i = 0; i < dL.length; i++) dL[i] = dOut[i]!;
    for (let l = L - 1; l >= 0; l--) {
      const nin = this.sizes[l]!;
      const nout = this.sizes[l + 1]!;
      const w = this.w[l]!;
      const gw = this.gw[l]!;
      const gb = this.gb[l]!;
      const inp = this.a[l]!;
      const d = this.delta[l + 1]!;
      const dIn = this.delta[l]!;
      dIn.fill(0);
      for (let o = 0; o < nout; o++) {
        const g = d[o]!;
        if (g === 0) continue;
        gb[o] = gb[o]! + g;
        const row = o * nin;
        for (let i = 0; i < nin; i++) {
          gw[row + i] = gw[row + i]! + g * inp[i]!;
          dIn[i] = dIn[i]! + g * w[row + i]!;
        }
      }
      // Through the previous layer's ReLU (its output is inp; zero where it was cut).
      if (l > 0) for (let i = 0; i < nin; i++) if (inp[i]! <= 0) dIn[i] = 0;
    }
  }

  zeroGrad(): void {
    for (const g of this.gw) g.fill(0);
    for (const g of this.gb) g.fill(0);
  }

  /** One Adam step on the accumulated gradients (scaled by `scale`, e.g. 1/batch), then zero them. */
  adam(lr: number, scale = 1, b1 = 0.9, b2 = 0.999, eps = 1e-8): void {
    this.t++;
    const c1 = 1 - b1 ** this.t;
    const c2 = 1 - b2 ** this.t;
    const step = (p: Float64Array, g: Float64Array, m: Float64Array, v: Float64Array): void => {
      for (let i = 0; i < p.length; i++) {
        const gi = g[i]! * scale;
        m[i] = b1 * m[i]! + (1 - b1) * gi;
        v[i] = b2 * v[i]! + (1 - b2) * gi * gi;
        p[i] = p[i]! - (lr * (m[i]! / c1)) / (Math.sqrt(v[i]! / c2) + eps);
      }
    };
    for (let l = 0; l < this.w.length; l++) {
      step(this.w[l]!, this.gw[l]!, this.mw[l]!, this.vw[l]!);
      step(this.b[l]!, this.gb[l]!, this.mb[l]!, this.vb[l]!);
    }
    this.zeroGrad();
  }

  /** Copy weights from another net of the same shape (DQN's target network). */
  copyFrom(o: Mlp): void {
    for (let l = 0; l < this.w.length; l++) {
      this.w[l]!.set(o.w[l]!);
      this.b[l]!.set(o.b[l]!);
    }
  }

  toJSON(): MlpJson {
    return {
      sizes: this.sizes,
      layers: this.w.map((w, l) => ({ w: Array.from(w), b: Array.from(this.b[l]!) })),
    };
  }

  /** Rebuild from JSON; throws a clear Error on a malformed document. */
  static fromJSON(j: unknown): Mlp {
    const bad = (why: string): never => {
      throw new Error(`mlp weights: ${why}`);
    };
    if (!j || typeof j !== 'object') bad('not an object');
    const o = j as { sizes?: unknown; layers?: unknown };
    if (!Array.isArray(o.sizes) || o.sizes.length < 2 || !o.sizes.every((s) => Number.isInteger(s) && s > 0))
      bad('sizes must be an array of >= 2 positive integers');
    const sizes = o.sizes as number[];
    if (!Array.isArray(o.layers) || o.layers.length !== sizes.length - 1) bad('layers must match sizes');
    const m = new Mlp(sizes, () => 0.5);
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
}
