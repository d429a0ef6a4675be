/**
 * The arithmetic of the output-length predictor (output-length-model.ts): softmax regression over
 * sparse hashed features — logits, softmax, cross-entropy and its gradient — and the Adam step it
 * learns with. Weights are one Float64Array, K per feature (or K weights then their two Adam
 * moments, `stride` 3K). Pure; no allocation on the hot paths (logitsAt, adam).
 */

/** Sparse feature vector: parallel index/value arrays, `n` used. */
export interface Features {
  idx: Int32Array;
  val: Float64Array;
  n: number;
}

/** Numerically stable softmax of `logits` into `out`. */
export function softmax(logits: Float64Array, out: Float64Array): void {
  let max = -Infinity;
  for (let k = 0; k < logits.length; k++) if (logits[k]! > max) max = logits[k]!;
  let sum = 0;
  for (let k = 0; k < logits.length; k++) sum += out[k] = Math.exp(logits[k]! - max);
  for (let k = 0; k < logits.length; k++) out[k] = out[k]! / sum;
}

/**
 * logits[k] = Σ_j val_j · w[idx_j · stride + k] (stride: the row length of `w`, K when it holds
 * only weights).
 */
export function logitsOf(w: Float64Array, f: Features, K: number, out: Float64Array, stride = K): void {
  logitsAt(w, f.idx, f.val, 0, f.n, K, out, stride);
}

/** logitsOf over the n features stored from `off` in idx / val. */
export function logitsAt(
  w: Float64Array,
  idx: Int32Array,
  val: Float64Array,
  off: number,
  n: number,
  K: number,
  out: Float64Array,
  stride: number,
): void {
  const end = off + n;
  if (K === 3) {
    // The default three buckets, with the sums in registers (the same additions in the same order).
    let z0 = 0;
    let z1 = 0;
    let z2 = 0;
    for (let j = off; j < end; j++) {
      const base = idx[j]! * stride;
      const x = val[j]!;
      z0 = z0 + x * w[base]!;
      z1 = z1 + x * w[base + 1]!;
      z2 = z2 + x * w[base + 2]!;
    }
    out[0] = z0;
    out[1] = z1;
    out[2] = z2;
    return;
  }
  out.fill(0);
  for (let j = off; j < end; j++) {
    const base = idx[j]! * stride;
    const x = val[j]!;
    for (let k = 0; k < K; k++) out[k] = out[k]! + x * w[base + k]!;
  }
}

/** Cross-entropy of `label` under the model (for tests and reporting). */
export function crossEntropy(w: Float64Array, f: Features, K: number, label: number): number {
  const z = new Float64Array(K);
  const p = new Float64Array(K);
  logitsOf(w, f, K, z);
  softmax(z, p);
  return -Math.log(Math.max(p[label]!, 1e-300));
}

/**
 * ∂ crossEntropy / ∂ w[idx_j · K + k] = val_j · (p_k − [k = label]); `each` receives every one.
 * Features are deduplicated at extraction, so each weight appears once.
 */
export function crossEntropyGrad(
  w: Float64Array,
  f: Features,
  K: number,
  label: number,
  each: (weight: number, g: number) => void,
  probs: Float64Array = new Float64Array(K),
): void {
  const z = new Float64Array(K);
  logitsOf(w, f, K, z);
  softmax(z, probs);
  for (let j = 0; j < f.n; j++) {
    const base = f.idx[j]! * K;
    const x = f.val[j]!;
    for (let k = 0; k < K; k++) each(base + k, x * (probs[k]! - (k === label ? 1 : 0)));
  }
}

/** Adam's moment decays. */
export const B1 = 0.9;
export const B2 = 0.999;

/**
 * One Adam step on weight wmv[wi], its moments K and 2K further on, gradient g; c1 / c2 the bias
 * corrections (one1 / one2: they are exactly 1, and x / 1 is x).
 */
export function adam(
  wmv: Float64Array,
  wi: number,
  K: number,
  g: number,
  lr: number,
  c1: number,
  c2: number,
  one1: boolean,
  one2: boolean,
): void {
  const mi = wi + K;
  const vi = mi + K;
  const m = B1 * wmv[mi]! + (1 - B1) * g;
  const v = B2 * wmv[vi]! + (1 - B2) * g * g;
  wmv[mi] = m;
  wmv[vi] = v;
  wmv[wi] = wmv[wi]! - (lr * (one1 ? m : m / c1)) / (Math.sqrt(one2 ? v : v / c2) + 1e-8);
}
