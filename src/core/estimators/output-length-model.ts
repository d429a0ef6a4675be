/**
 * The performance-aware router §4.1's output-length predictor, learned online: softmax regression over hashed sparse
 * features, trained one completed request at a time with (lazy, sparse) Adam. It predicts a BUCKET
 * of answer length whose edges are expected decode times (seed: 0–0.5 s, 0.5–2 s, ≥ 2 s at its
 * 500 tokens/s → 0–250, 250–1000, ≥ 1000 tokens), not a token count: a class is what a router
 * needs (light vs heavy decode) and is far easier to get right than a number.
 *
 * Features, all a router sees without a GPU model (seed uses DistilBERT; C.12 shows length + app
 * name alone reach 79 % on production traffic):
 * - model; prompt length (log2 bucket and log value); num_predict / max_tokens (log2 bucket);
 * - a task hint: "This is a <task> task" in the prompt's last or first 240 characters (seed C.5.2),
 *   or one the host supplies (`hint`: a header's value) — and its cross with the prompt bucket;
 * - the first line's hash (a system prompt or template header: one value per application);
 * - hashed word unigrams and bigrams of the prompt's first and last 160 characters, where task
 *   instructions sit (seed C.5.1 puts them at the start or the end).
 * Hashing keeps memory fixed (dim × buckets weights) and makes prediction allocation-light and
 * bounded: only ~320 characters are scanned however long the prompt, so a prediction is a few µs.
 *
 * Pure and deterministic: weights start at zero, updates depend only on the samples' order.
 */
import { adam, B1, B2, logitsAt, softmax, type Features } from './softmax-regression.js';
export { crossEntropy, crossEntropyGrad, logitsOf, softmax, type Features } from './softmax-regression.js';

/** What the predictor looks at for one request. */
export interface LengthQuery {
  readonly model: string;
  readonly promptTokens: number;
  readonly maxTokens?: number | undefined;
  /** Prompt text (chat messages flattened). */
  readonly text: string;
  /** A task hint from outside the prompt (a configured header's value), if any. */
  readonly hint?: string | undefined;
}

export interface LengthPrediction {
  readonly bucket: number;
  /** Probability of the predicted bucket. */
  readonly confidence: number;
  /** Σ p(bucket) · mean observed answer length in it, capped by maxTokens. */
  readonly expectedTokens: number;
}

export interface OutputLengthModelOptions {
  /** Hashed feature space size (power of two). */
  readonly dim?: number;
  /** Ascending answer-length edges in tokens: bucket i is [edge[i-1], edge[i]). */
  readonly edges?: readonly number[];
  readonly learningRate?: number;
  /** Characters scanned for word n-grams at each end of the prompt. */
  readonly scanChars?: number;
}

/** The performance-aware router §4.1: 0.5 s and 2 s of decode at 500 tokens/s. */
export const SEED_004_EDGES: readonly number[] = [250, 1000];

const MAX_FEATURES = 512;
const HINT_RE = /this is an? ([a-z][a-z0-9 _-]{0,40}?) task/i;
const HINT_WINDOW = 240;

/** FNV-1a over a string, continuing from `h`. */
function fnv(s: string, h = 0x811c9dc5): number {
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function mix(a: number, b: number): number {
  return Math.imul(a ^ Math.imul(b, 0x9e3779b1), 0x85ebca6b) >>> 0;
}

function fnvRange(s: string, from: number, to: number, h: number): number {
  for (let i = from; i < to; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

const log2Bucket = (n: number): number => (n < 1 ? 0 : 1 + Math.floor(Math.log2(n)));

/**
 * Entries of one kept feature vector (OutputLengthModel.keep). Task-mix prompts give 22–143
 * features; a longer vector is not kept (its features are extracted again when learning).
 */
const KEPT_BLOCK = 192;
/**
 * Kept vectors at most (2.3 KB each, allocated 64 at a time as needed: ~2.5 MB for the ~1,100
 * requests jsq has in flight on mixed-4x, 9.4 MB at most): past it, requests' features are
 * extracted again when learning.
 */
const MAX_KEPT = 4096;
/** Kept vectors per chunk of the store (chunks are added as needed, never copied). */
const KEPT_CHUNK = 64;

export class OutputLengthModel {
  readonly edges: readonly number[];
  readonly buckets: number;
  private readonly dim: number;
  private readonly mask: number;
  private readonly lr: number;
  private readonly scan: number;
  /**
   * Weights and their Adam moments, one row of 3K per hashed feature: w (K), m (K), v (K). A
   * learning step touches all three for ~85 random rows; side by side they share cache lines.
   */
  private readonly wmv: Float64Array;
  private readonly stride: number;
  private step = 0;
  /** Observed answers per bucket: count and mean tokens (for expectedTokens). */
  private readonly count: Float64Array;
  private readonly mean: Float64Array;
  /** Scratch, reused by every call (single-threaded core). */
  private readonly f: Features = {
    idx: new Int32Array(MAX_FEATURES),
    val: new Float64Array(MAX_FEATURES),
    n: 0,
  };
  private readonly acc: Float64Array;
  private readonly z: Float64Array;
  private readonly p: Float64Array;
  /**
   * Kept feature vectors (keep): vector h holds keptLen[h] entries from (h mod KEPT_CHUNK) ·
   * KEPT_BLOCK in chunk ⌊h / KEPT_CHUNK⌋ of keptIdx and keptVal. Freed ones are reused last-freed
   * first (still in cache). No allocation per request.
   */
  private readonly keptIdx: Int32Array[] = [];
  private readonly keptVal: Float64Array[] = [];
  private readonly keptLen = new Int32Array(MAX_KEPT);
  private keptUsed = 0;
  /** Written by learnAt so that its cache-warming reads are not optimised away. */
  private touched = 0;
  private readonly keptFree: number[] = [];
  private observed = 0;
  private lastModel = '';
  private lastModelH = fnv('', 0x1234567);

  constructor(opts: OutputLengthModelOptions = {}) {
    const dim = opts.dim ?? 1 << 14;
    if (!(Number.isInteger(Math.log2(dim)) && dim >= 16))
      throw new RangeError('dim must be a power of two >= 16');
    const edges = opts.edges ?? SEED_004_EDGES;
    for (let i = 0; i < edges.length; i++)
      if (!(edges[i]! > (i === 0 ? 0 : edges[i - 1]!)))
        throw new RangeError('edges must be positive and ascending');
    this.edges = [...edges];
    this.buckets = edges.length + 1;
    this.dim = dim;
    this.mask = dim - 1;
    this.lr = opts.learningRate ?? 0.01;
    this.scan = opts.scanChars ?? 160;
    const K = this.buckets;
    this.stride = 3 * K;
    this.wmv = new Float64Array(dim * this.stride);
    this.acc = new Float64Array(dim);
    this.z = new Float64Array(K);
    this.p = new Float64Array(K);
    this.count = new Float64Array(K);
    this.mean = new Float64Array(K);
    // Before any sample, a bucket's mean is its midpoint (the last: 2 × its lower edge).
    for (let k = 0; k < K; k++) {
      const lo = k === 0 ? 0 : edges[k - 1]!;
      this.mean[k] = k < edges.length ? (lo + edges[k]!) / 2 : 2 * lo;
    }
  }

  /** Bucket of an answer of `tokens` tokens. */
  bucketOf(tokens: number): number {
    let k = 0;
    while (k < this.edges.length && tokens >= this.edges[k]!) k++;
    return k;
  }

  /** Completed answers learned from. */
  get samples(): number {
    return this.observed;
  }

  /**
   * The hashed features of `q` (shared scratch: valid until the next call). A pure function of
   * `q`: a caller may keep a copy (`keep`) and predict and learn from it later.
   */
  features(q: LengthQuery): Features {
    const f = this.f;
    const acc = this.acc;
    f.n = 0;
    const pb = log2Bucket(q.promptTokens);
    // One application mostly sends one model: its hash is kept for the next call.
    if (q.model !== this.lastModel) {
      this.lastModel = q.model;
      this.lastModelH = fnv(q.model, 0x1234567);
    }
    const modelH = this.lastModelH;
    this.add(0x9e3779b9, 1); // bias
    this.add(modelH, 1);
    this.add(mix(0x5000 + pb, 1), 1);
    this.add(mix(modelH, 0x5000 + pb), 1);
    this.add(0x77777777, Math.log1p(Math.max(0, q.promptTokens)) / 8);
    this.add(
      mix(0x6000 + (q.maxTokens !== undefined && q.maxTokens > 0 ? log2Bucket(q.maxTokens) : 0), 2),
      1,
    );
    // Task hint: supplied, or "This is a <task> task" near either end of the prompt.
    const text = q.text;
    let hint = q.hint;
    if (hint === undefined) {
      const tail = text.length > HINT_WINDOW ? text.slice(text.length - HINT_WINDOW) : text;
      let m = HINT_RE.exec(tail);
      if (!m && text.length > HINT_WINDOW) m = HINT_RE.exec(text.slice(0, HINT_WINDOW));
      hint = m?.[1];
    }
    if (hint !== undefined && hint.length > 0) {
      const th = fnv(hint.toLowerCase(), 0x7a5c);
      this.add(th, 1);
      this.add(mix(th, 0x5000 + pb), 1);
    }
    // First line (system prompt / template header), when there is more than one line: its first
    // 64 characters are enough to tell one application's header from another's.
    const nl = text.indexOf('\n');
    if (nl > 0) this.add(fnvRange(text, 0, Math.min(nl, 64), 0x5e5e), 1);
    // Word uni/bigrams at both ends.
    const n0 = f.n;
    const scan = this.scan;
    if (text.length <= 2 * scan) this.words(text, 0, text.length);
    else {
      this.words(text, 0, scan);
      this.words(text, text.length - scan, text.length);
    }
    // n-gram values: 1/√count so long and short prompts weigh alike.
    const grams = f.n - n0;
    const scale = grams > 0 ? 1 / Math.sqrt(grams) : 0;
    for (let j = n0; j < f.n; j++) acc[f.idx[j]!] = acc[f.idx[j]!]! * scale;
    for (let j = 0; j < f.n; j++) {
      const i = f.idx[j]!;
      f.val[j] = acc[i]!;
      acc[i] = 0;
    }
    return f;
  }

  /**
   * Keeps a copy of `f` (features' scratch) and returns its handle, or -1 when it is not kept
   * (too long, or MAX_KEPT are kept): a router keeps a request's features from its prediction to
   * its completion instead of extracting them twice. Give a handle back with `release`.
   */
  keep(f: Features): number {
    const n = f.n;
    if (n > KEPT_BLOCK) return -1;
    let h = this.keptFree.pop();
    if (h === undefined) {
      if (this.keptUsed >= MAX_KEPT) return -1;
      h = this.keptUsed++;
      if (h % KEPT_CHUNK === 0) {
        this.keptIdx.push(new Int32Array(KEPT_CHUNK * KEPT_BLOCK));
        this.keptVal.push(new Float64Array(KEPT_CHUNK * KEPT_BLOCK));
      }
    }
    const off = (h % KEPT_CHUNK) * KEPT_BLOCK;
    const keptIdx = this.keptIdx[(h / KEPT_CHUNK) | 0]!;
    const keptVal = this.keptVal[(h / KEPT_CHUNK) | 0]!;
    for (let j = 0; j < n; j++) {
      keptIdx[off + j] = f.idx[j]!;
      keptVal[off + j] = f.val[j]!;
    }
    this.keptLen[h] = n;
    return h;
  }

  /** A handle from `keep` is no longer used (-1: none). */
  release(h: number): void {
    if (h >= 0) this.keptFree.push(h);
  }

  /** Adds x to feature h (hashed into the table), deduplicating through `acc`. */
  private add(h: number, x: number): void {
    const f = this.f;
    const i = h & this.mask;
    if (this.acc[i] === 0) {
      if (f.n >= MAX_FEATURES) return;
      f.idx[f.n++] = i;
    }
    this.acc[i] = this.acc[i]! + x;
  }

  /** Word uni- and bigrams of text[from, to), each added with value 1 (add's logic, inlined). */
  private words(text: string, from: number, to: number): void {
    const f = this.f;
    const idx = f.idx;
    const acc = this.acc;
    const mask = this.mask;
    let n = f.n;
    let h = 0x811c9dc5;
    let len = 0;
    let prev = 0;
    for (let i = from; i <= to; i++) {
      let c = i < to ? text.charCodeAt(i) : 32;
      if (c >= 65 && c <= 90) c += 32;
      if ((c >= 97 && c <= 122) || (c >= 48 && c <= 57)) {
        h = Math.imul(h ^ c, 0x01000193);
        len++;
      } else if (len > 0) {
        const u = h >>> 0;
        let j = mix(u, 0x1111) & mask;
        if (acc[j] !== 0 || n < MAX_FEATURES) {
          if (acc[j] === 0) idx[n++] = j;
          acc[j] = acc[j]! + 1;
        }
        if (prev !== 0) {
          j = mix(prev, u) & mask;
          if (acc[j] !== 0 || n < MAX_FEATURES) {
            if (acc[j] === 0) idx[n++] = j;
            acc[j] = acc[j]! + 1;
          }
        }
        prev = u;
        h = 0x811c9dc5;
        len = 0;
      }
    }
    f.n = n;
  }

  predict(q: LengthQuery): LengthPrediction {
    return this.predictFeatures(this.features(q), q.maxTokens);
  }

  /** predict() from the request's features (`features(q)`) and its maxTokens. */
  predictFeatures(f: Features, maxTokens: number | undefined): LengthPrediction {
    return this.predictAt(f.idx, f.val, 0, f.n, maxTokens);
  }

  /** predict() from kept features (a handle from `keep`). */
  predictKept(h: number, maxTokens: number | undefined): LengthPrediction {
    const c = (h / KEPT_CHUNK) | 0;
    const off = (h % KEPT_CHUNK) * KEPT_BLOCK;
    return this.predictAt(this.keptIdx[c]!, this.keptVal[c]!, off, this.keptLen[h]!, maxTokens);
  }

  private predictAt(
    idx: Int32Array,
    val: Float64Array,
    off: number,
    n: number,
    maxTokens: number | undefined,
  ): LengthPrediction {
    const K = this.buckets;
    logitsAt(this.wmv, idx, val, off, n, K, this.z, this.stride);
    softmax(this.z, this.p);
    let best = 0;
    let expected = 0;
    for (let k = 0; k < K; k++) {
      if (this.p[k]! > this.p[best]!) best = k;
      expected += this.p[k]! * this.mean[k]!;
    }
    const cap = maxTokens !== undefined && maxTokens > 0 ? maxTokens : Infinity;
    if (cap < Infinity) best = Math.min(best, this.bucketOf(cap));
    return { bucket: best, confidence: this.p[best]!, expectedTokens: Math.max(1, Math.min(expected, cap)) };
  }

  /** Learn from a completed request that generated `outputTokens` (one Adam step). */
  observe(q: LengthQuery, outputTokens: number): void {
    if (!(Number.isFinite(outputTokens) && outputTokens > 0)) return;
    const f = this.features(q);
    this.learnAt(f.idx, f.val, 0, f.n, outputTokens);
  }

  /** observe() from kept features (a handle from `keep`). */
  observeKept(h: number, outputTokens: number): void {
    if (!(Number.isFinite(outputTokens) && outputTokens > 0)) return;
    const c = (h / KEPT_CHUNK) | 0;
    const off = (h % KEPT_CHUNK) * KEPT_BLOCK;
    this.learnAt(this.keptIdx[c]!, this.keptVal[c]!, off, this.keptLen[h]!, outputTokens);
  }

  /**
   * One Adam step on the n features from `off` in idx / val: crossEntropyGrad's gradient, with
   * Adam applied to each weight as it comes (the same arithmetic, without a call per weight).
   */
  private learnAt(idx: Int32Array, val: Float64Array, off: number, n: number, outputTokens: number): void {
    const label = this.bucketOf(outputTokens);
    const K = this.buckets;
    const S = this.stride;
    this.step++;
    const c1 = 1 - B1 ** this.step;
    const c2 = 1 - B2 ** this.step;
    const lr = this.lr;
    const wmv = this.wmv;
    const probs = this.p;
    const end = off + n;
    if (K === 3) {
      // logitsAt's K = 3 path, which also reads each row's last word: the rows are mostly out of
      // cache by the time a request completes, and this pass, with nothing else to wait for,
      // brings in both of a row's cache lines before the slower update loop needs them.
      let z0 = 0;
      let z1 = 0;
      let z2 = 0;
      let touch = 0;
      for (let j = off; j < end; j++) {
        const base = idx[j]! * S;
        const x = val[j]!;
        z0 = z0 + x * wmv[base]!;
        z1 = z1 + x * wmv[base + 1]!;
        z2 = z2 + x * wmv[base + 2]!;
        touch += wmv[base + S - 1]!;
      }
      this.z[0] = z0;
      this.z[1] = z1;
      this.z[2] = z2;
      this.touched = touch;
    } else logitsAt(wmv, idx, val, off, n, K, this.z, S);
    softmax(this.z, probs);
    // Bias corrections reach exactly 1 (b1^step under half an ulp of 1 from step ~350, b2^step
    // from ~36,000), and x / 1 is x: those divisions are skipped then, the results unchanged.
    const one1 = c1 === 1;
    const one2 = c2 === 1;
    if (K === 3) {
      // Unrolled: the three weights' updates are independent, and their divisions overlap.
      const d0 = probs[0]! - (label === 0 ? 1 : 0);
      const d1 = probs[1]! - (label === 1 ? 1 : 0);
      const d2 = probs[2]! - (label === 2 ? 1 : 0);
      for (let j = off; j < end; j++) {
        const base = idx[j]! * S;
        const x = val[j]!;
        adam(wmv, base, 3, x * d0, lr, c1, c2, one1, one2);
        adam(wmv, base + 1, 3, x * d1, lr, c1, c2, one1, one2);
        adam(wmv, base + 2, 3, x * d2, lr, c1, c2, one1, one2);
      }
    } else {
      for (let j = off; j < end; j++) {
        const base = idx[j]! * S;
        const x = val[j]!;
        for (let k = 0; k < K; k++)
          adam(wmv, base + k, K, x * (probs[k]! - (k === label ? 1 : 0)), lr, c1, c2, one1, one2);
      }
    }
    this.count[label] = this.count[label]! + 1;
    this.mean[label] = this.mean[label]! + (outputTokens - this.mean[label]!) / this.count[label]!;
    this.observed++;
  }
}
