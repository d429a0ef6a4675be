import { MlpNet } from '../core/estimators/mlp.js';

export type { MlpJson } from '../core/estimators/mlp.js';

/**
 * The trainable MLP: the core's inference net (src/core/estimators/mlp.ts) plus backpropagation
 * and Adam — hand-written (no native ML dependency) and deterministic under a seed: weights are
 * drawn from the given generator (He initialisation), and nothing else is random.
 */
export class Mlp extends MlpNet {
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
    super(sizes);
    const L = sizes.length - 1;
    const mk = (f: (l: number) => number): Float64Array[] =>
      Array.from({ length: L }, (_, l) => new Float64Array(f(l)));
    this.gw = mk((l) => sizes[l]! * sizes[l + 1]!);
    this.gb = mk((l) => sizes[l + 1]!);
    this.mw = mk((l) => sizes[l]! * sizes[l + 1]!);
    this.vw = mk((l) => sizes[l]! * sizes[l + 1]!);
    this.mb = mk((l) => sizes[l + 1]!);
    this.vb = mk((l) => sizes[l + 1]!);
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

  /** Rebuild from JSON (Adam state fresh); throws a clear Error on a malformed document. */
  static override fromJSON(j: unknown): Mlp {
    return MlpNet.load(j, (sizes) => new Mlp(sizes, () => 0.5));
  }
}
