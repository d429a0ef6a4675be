import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRng } from '../rng.js';
import { taskMixWorkload } from '../../workloads/task-mix.js';
import { flattenMessages } from '../prompt.js';
import {
  crossEntropy,
  crossEntropyGrad,
  logitsOf,
  OutputLengthModel,
  softmax,
  type Features,
  type LengthQuery,
} from './output-length-model.js';

test('gradient check: analytic cross-entropy gradient matches central differences', () => {
  const K = 3;
  const dim = 8;
  const rng = createRng(7);
  const w = Float64Array.from({ length: dim * K }, () => rng() - 0.5);
  const f: Features = { idx: Int32Array.from([0, 3, 5, 6]), val: Float64Array.from([1, 0.5, -1.2, 2]), n: 4 };
  for (let label = 0; label < K; label++) {
    const grads = new Map<number, number>();
    crossEntropyGrad(w, f, K, label, (i, g) => grads.set(i, g));
    for (let i = 0; i < w.length; i++) {
      const h = 1e-6;
      const keep = w[i]!;
      w[i] = keep + h;
      const up = crossEntropy(w, f, K, label);
      w[i] = keep - h;
      const down = crossEntropy(w, f, K, label);
      w[i] = keep;
      const numeric = (up - down) / (2 * h);
      const analytic = grads.get(i) ?? 0;
      assert.ok(Math.abs(numeric - analytic) < 1e-6, `w[${i}] label ${label}: ${numeric} vs ${analytic}`);
    }
  }
});

test('buckets by expected decode time: the performance-aware router edges 250 / 1000 tokens', () => {
  const m = new OutputLengthModel();
  assert.equal(m.buckets, 3);
  assert.deepEqual(
    [1, 249, 250, 999, 1000, 5000].map((t) => m.bucketOf(t)),
    [0, 0, 1, 1, 2, 2],
  );
  assert.throws(() => new OutputLengthModel({ edges: [10, 5] }), /ascending/);
});

test('learns a separable toy task online (the word decides the bucket), deterministically', () => {
  const words = ['summarize', 'translate', 'essay'];
  const lengths = [50, 400, 1500];
  const draw = (rng: () => number): { q: LengthQuery; out: number; k: number } => {
    const k = Math.floor(rng() * 3);
    const filler = Array.from({ length: 5 + Math.floor(rng() * 20) }, () => `w${Math.floor(rng() * 500)}`);
    const text = `${filler.join(' ')} please ${words[k]} this`;
    return { q: { model: 'm', promptTokens: Math.ceil(text.length / 4), text }, out: lengths[k]!, k };
  };
  const train = (seed: number): OutputLengthModel => {
    const m = new OutputLengthModel();
    const rng = createRng(seed);
    for (let i = 0; i < 300; i++) {
      const s = draw(rng);
      m.observe(s.q, s.out);
    }
    return m;
  };
  const m = train(1);
  const rng = createRng(99);
  let right = 0;
  for (let i = 0; i < 300; i++) {
    const s = draw(rng);
    if (m.predict(s.q).bucket === s.k) right++;
  }
  assert.ok(right / 300 > 0.97, `toy accuracy ${right / 300}`);
  // Before learning it knows nothing: expected tokens are the prior midpoints' average.
  const fresh = new OutputLengthModel();
  assert.ok(Math.abs(fresh.predict(draw(createRng(1)).q).expectedTokens - (125 + 625 + 2000) / 3) < 1e-6);
  // Same samples, same weights.
  const probe = draw(createRng(5)).q;
  assert.deepEqual(train(1).predict(probe), m.predict(probe));
  // Learned means: a 'translate' prompt expects ~400 tokens; max_tokens caps it.
  const tq = { model: 'm', promptTokens: 10, text: 'w1 w2 please translate this' };
  assert.equal(m.predict(tq).bucket, 1);
  const e = m.predict(tq).expectedTokens;
  assert.ok(e > 300 && e < 600, `${e}`);
  const capped = m.predict({ ...tq, maxTokens: 100 });
  assert.equal(capped.bucket, 0);
  assert.equal(capped.expectedTokens, 100);
});

test('task hint "This is a <task> task" (or a supplied one) is a feature of its own', () => {
  const m = new OutputLengthModel();
  // Same filler, only the hint tells the length.
  for (let i = 0; i < 200; i++) {
    m.observe({ model: 'm', promptTokens: 30, text: `some text ${i % 7}. This is a qna task` }, 600);
    m.observe({ model: 'm', promptTokens: 30, text: `some text ${i % 7}. This is a translation task` }, 40);
  }
  assert.equal(
    m.predict({ model: 'm', promptTokens: 30, text: 'other words. This is a qna task' }).bucket,
    1,
  );
  assert.equal(
    m.predict({ model: 'm', promptTokens: 30, text: 'other words', hint: 'translation' }).bucket,
    0,
  );
});

/** Task-mix requests as (query, true length, task); `hint` appends the seed's task hint. */
function taskMix(
  seed: number,
  count: number,
  hint: boolean,
): { q: LengthQuery; out: number; task: string }[] {
  const rs = taskMixWorkload({ rate: 20, count }, seed).start();
  return rs.map(({ request: r }) => {
    let text = r.prompt ?? flattenMessages(r.messages ?? []);
    if (hint) text += `\nThis is a ${r.task} task`;
    return {
      q: { model: r.model, promptTokens: Math.ceil(text.length / 4), text },
      out: r.outputTokens,
      task: r.task ?? '',
    };
  });
}

test('task-mix (the performance-aware router workload): bucket accuracy with and without the task hint (prediction time: npm run bench:predict)', () => {
  const test = (hint: boolean): { q: LengthQuery; out: number; task: string }[] => taskMix(2, 1000, hint);
  const acc = (hint: boolean): number => {
    const m = new OutputLengthModel();
    for (const s of taskMix(1, 3000, hint)) m.observe(s.q, s.out);
    let right = 0;
    for (const s of test(hint)) if (m.predict(s.q).bucket === m.bucketOf(s.out)) right++;
    return right / 1000;
  };
  // The generator draws each answer's length from its task's light/heavy mixture, independent of
  // the text: no predictor beats the majority bucket of each task (the ceiling, ~69 %).
  const byTask = new Map<string, [number, number]>();
  for (const s of test(false)) {
    const c = byTask.get(s.task) ?? [0, 0];
    c[s.out >= 250 ? 1 : 0]++;
    byTask.set(s.task, c);
  }
  let ceiling = 0;
  for (const c of byTask.values()) ceiling += Math.max(...c) / 1000;
  const withHint = acc(true);
  const without = acc(false);
  console.log(
    `task-mix bucket accuracy: with hint ${(withHint * 100).toFixed(1)} %, without ${(without * 100).toFixed(1)} %, ceiling ${(ceiling * 100).toFixed(1)} %`,
  );
  assert.ok(withHint > ceiling - 0.06, `with hint ${withHint} (ceiling ${ceiling})`);
  assert.ok(without > ceiling - 0.06, `without hint ${without} (ceiling ${ceiling})`);
});

/** The model as first written: separate w, m, v and Adam applied through crossEntropyGrad. */
class ReferenceModel {
  private readonly inner = new OutputLengthModel();
  private readonly K = 3;
  private readonly w = new Float64Array((1 << 14) * 3);
  private readonly m = new Float64Array((1 << 14) * 3);
  private readonly v = new Float64Array((1 << 14) * 3);
  private step = 0;
  observe(q: LengthQuery, out: number): void {
    const f = this.inner.features(q);
    const label = this.inner.bucketOf(out);
    this.step++;
    const c1 = 1 - 0.9 ** this.step;
    const c2 = 1 - 0.999 ** this.step;
    const { w, m, v } = this;
    crossEntropyGrad(w, f, this.K, label, (i, g) => {
      m[i] = 0.9 * m[i]! + (1 - 0.9) * g;
      v[i] = 0.999 * v[i]! + (1 - 0.999) * g * g;
      w[i] = w[i]! - (0.01 * (m[i]! / c1)) / (Math.sqrt(v[i]! / c2) + 1e-8);
    });
  }
  probs(q: LengthQuery): number[] {
    const z = new Float64Array(this.K);
    const p = new Float64Array(this.K);
    logitsOf(this.w, this.inner.features(q), this.K, z);
    softmax(z, p);
    return [...p];
  }
}

test('learning steps are exactly Adam on crossEntropyGrad (the inlined step changes no bit)', () => {
  const ref = new ReferenceModel();
  const m = new OutputLengthModel();
  const samples = taskMix(4, 400, false);
  for (const s of samples) {
    ref.observe(s.q, s.out);
    m.observe(s.q, s.out);
  }
  for (const s of taskMix(5, 50, false)) {
    const p = ref.probs(s.q);
    const k = p.indexOf(Math.max(...p));
    const got = m.predict(s.q);
    assert.equal(got.confidence, p[k]);
  }
});

test('kept features predict and learn exactly as the request itself; long ones are not kept', () => {
  const a = new OutputLengthModel();
  const b = new OutputLengthModel();
  const samples = taskMix(6, 300, true);
  const handles: number[] = [];
  // Predict all first (as a router does at arrival), learn later, out of order.
  for (const s of samples) {
    const f = b.features(s.q);
    const kept = b.keep(f);
    assert.ok(kept >= 0);
    handles.push(kept);
    assert.deepEqual(b.predictKept(kept, s.q.maxTokens), a.predict(s.q));
  }
  const order = samples.map((_, i) => i).reverse();
  for (const i of order) {
    a.observe(samples[i]!.q, samples[i]!.out);
    b.observeKept(handles[i]!, samples[i]!.out);
    b.release(handles[i]!);
  }
  const probe = taskMix(7, 20, true);
  for (const s of probe) assert.deepEqual(b.predict(s.q), a.predict(s.q));
  // Released handles are handed out again; a vector longer than a block is not kept.
  assert.ok(handles.includes(b.keep(b.features(probe[0]!.q))));
  const long = Array.from({ length: 400 }, (_, i) => i.toString(36).padStart(2, '0')).join(' ');
  const lf = b.features({ model: 'm', promptTokens: 100, text: long });
  assert.ok(lf.n > 192, `${lf.n} features`);
  assert.equal(b.keep(lf), -1);
});

/**
 * Feature extraction as first written (a dense table of totals, `acc`), to check the compact
 * deduplication against: same entries, same order, same values — including a value-0 feature
 * whose row another feature hashes into, and the 512-feature cap.
 */
function referenceFeatures(q: LengthQuery, dim: number, scan: number): { idx: number[]; val: number[] } {
  const fnv = (s: string, h: number): number => {
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
    return h >>> 0;
  };
  const mix = (a: number, b: number): number => Math.imul(a ^ Math.imul(b, 0x9e3779b1), 0x85ebca6b) >>> 0;
  const log2Bucket = (n: number): number => (n < 1 ? 0 : 1 + Math.floor(Math.log2(n)));
  const acc = new Float64Array(dim);
  const idx: number[] = [];
  const add = (h: number, x: number): void => {
    const i = h & (dim - 1);
    if (acc[i] === 0) {
      if (idx.length >= 512) return;
      idx.push(i);
    }
    acc[i] = acc[i]! + x;
  };
  const words = (text: string, from: number, to: number): void => {
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
        add(mix(u, 0x1111), 1);
        if (prev !== 0) add(mix(prev, u), 1);
        prev = u;
        h = 0x811c9dc5;
        len = 0;
      }
    }
  };
  const pb = log2Bucket(q.promptTokens);
  const modelH = fnv(q.model, 0x1234567);
  add(0x9e3779b9, 1);
  add(modelH, 1);
  add(mix(0x5000 + pb, 1), 1);
  add(mix(modelH, 0x5000 + pb), 1);
  add(0x77777777, Math.log1p(Math.max(0, q.promptTokens)) / 8);
  add(mix(0x6000 + (q.maxTokens !== undefined && q.maxTokens > 0 ? log2Bucket(q.maxTokens) : 0), 2), 1);
  const text = q.text;
  let hint = q.hint;
  if (hint === undefined) {
    const re = /this is an? ([a-z][a-z0-9 _-]{0,40}?) task/i;
    const tail = text.length > 240 ? text.slice(text.length - 240) : text;
    let m = re.exec(tail);
    if (!m && text.length > 240) m = re.exec(text.slice(0, 240));
    hint = m?.[1];
  }
  if (hint !== undefined && hint.length > 0) {
    const th = fnv(hint.toLowerCase(), 0x7a5c);
    add(th, 1);
    add(mix(th, 0x5000 + pb), 1);
  }
  const nl = text.indexOf('\n');
  if (nl > 0) add(fnv(text.slice(0, Math.min(nl, 64)), 0x5e5e), 1);
  const n0 = idx.length;
  if (text.length <= 2 * scan) words(text, 0, text.length);
  else {
    words(text, 0, scan);
    words(text, text.length - scan, text.length);
  }
  const grams = idx.length - n0;
  const scale = grams > 0 ? 1 / Math.sqrt(grams) : 0;
  for (let j = n0; j < idx.length; j++) acc[idx[j]!] = acc[idx[j]!]! * scale;
  const val = idx.map((i) => {
    const v = acc[i]!;
    acc[i] = 0;
    return v;
  });
  return { idx, val };
}

test('feature extraction: entries, order and values as a dense table of totals gives them', () => {
  const rng = createRng(11);
  const word = (): string => `w${Math.floor(rng() * 40)}`;
  for (const [dim, scan] of [
    [1 << 14, 160],
    [16, 160], // every row shared: duplicates everywhere
    [1 << 14, 4000], // past the 512-feature cap
  ] as const) {
    const m = new OutputLengthModel({ dim, scanChars: scan });
    for (let i = 0; i < 200; i++) {
      const text =
        (rng() < 0.3 ? 'Header line\n' : '') +
        Array.from({ length: Math.floor(rng() * (scan > 1000 ? 1500 : 120)) }, word).join(' ') +
        (rng() < 0.3 ? ' This is a qna task' : '');
      // promptTokens 0 gives a value-0 feature: with dim 16 other features land on its row.
      const q: LengthQuery = {
        model: `m${i % 3}`,
        promptTokens: rng() < 0.3 ? 0 : Math.ceil(text.length / 4),
        ...(rng() < 0.5 ? { maxTokens: Math.floor(rng() * 2000) } : {}),
        text,
      };
      const want = referenceFeatures(q, dim, scan);
      const got = m.features(q);
      assert.deepEqual([...got.idx.subarray(0, got.n)], want.idx, `idx ${dim}/${scan} #${i}`);
      assert.deepEqual([...got.val.subarray(0, got.n)], want.val, `val ${dim}/${scan} #${i}`);
    }
  }
});
