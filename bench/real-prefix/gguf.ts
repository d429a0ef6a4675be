/**
 * Writes a tiny random-weight llama model as a GGUF file, so the real-prefix bench runs real
 * llama.cpp engines without downloading weights. Its output is junk; what matters is that prefill
 * costs what a transformer's prefill costs (every prompt token through every layer, attention over
 * the context) and that llama.cpp keeps a real KV cache for it.
 *
 * Format: GGUF v3 (header, metadata key/values, tensor infos, tensor data aligned to 32 bytes),
 * F32 tensors. Tokenizer: llama.cpp's SentencePiece ("llama") tokenizer over a vocabulary of the
 * three specials, the 95 printable ASCII characters, '▁' (SentencePiece's space) and the 256 byte
 * tokens <0x00>..<0xFF> for everything else — no merges, so ASCII text is one token per character.
 */
import { open } from 'node:fs/promises';

/** The model's shape. */
export interface TinyLlamaShape {
  /** Hidden size (n_embd). */
  readonly embd: number;
  /** Transformer blocks. */
  readonly layers: number;
  /** Attention heads (head size = embd / heads). */
  readonly heads: number;
  /** Key/value heads (grouped-query attention when fewer than heads). */
  readonly kvHeads: number;
  /** Feed-forward width. */
  readonly ff: number;
  /** The context length the model declares (llama.context_length). */
  readonly contextLength: number;
  /** Seed of the weights. */
  readonly seed: number;
}

export const TINY_SHAPE: TinyLlamaShape = {
  embd: 64,
  layers: 2,
  heads: 4,
  kvHeads: 4,
  ff: 128,
  contextLength: 2048,
  seed: 1,
};

const ALIGN = 32;

// GGUF metadata value types.
const T_UINT32 = 4;
const T_INT32 = 5;
const T_FLOAT32 = 6;
const T_BOOL = 7;
const T_STRING = 8;
const T_ARRAY = 9;
// ggml tensor type.
const GGML_F32 = 0;

// llama.cpp token types.
const TOKEN_NORMAL = 1;
const TOKEN_UNKNOWN = 2;
const TOKEN_CONTROL = 3;
const TOKEN_BYTE = 6;

/** The vocabulary: specials, printable ASCII, '▁', then the byte-fallback tokens. */
export function tinyVocab(): { tokens: string[]; types: number[] } {
  const tokens = ['<unk>', '<s>', '</s>'];
  const types = [TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_CONTROL];
  for (let c = 0x21; c <= 0x7e; c++) {
    tokens.push(String.fromCharCode(c));
    types.push(TOKEN_NORMAL);
  }
  tokens.push('\u2581');
  types.push(TOKEN_NORMAL);
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(TOKEN_BYTE);
  }
  return { tokens, types };
}

type MetaValue =
  | { readonly t: 'u32'; readonly v: number }
  | { readonly t: 'f32'; readonly v: number }
  | { readonly t: 'bool'; readonly v: boolean }
  | { readonly t: 'str'; readonly v: string }
  | { readonly t: 'strs'; readonly v: readonly string[] }
  | { readonly t: 'f32s'; readonly v: readonly number[] }
  | { readonly t: 'i32s'; readonly v: readonly number[] };

/** Appends little-endian values to a growing byte list (the header is small: metadata and tensor infos). */
class ByteWriter {
  private readonly parts: Buffer[] = [];
  length = 0;
  private push(b: Buffer): void {
    this.parts.push(b);
    this.length += b.length;
  }
  u32(n: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(n);
    this.push(b);
  }
  i32(n: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(n);
    this.push(b);
  }
  u64(n: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(n));
    this.push(b);
  }
  f32(n: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(n);
    this.push(b);
  }
  str(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.push(b);
  }
  raw(b: Buffer): void {
    this.push(b);
  }
  bytes(): Buffer {
    return Buffer.concat(this.parts);
  }
}

function writeMeta(w: ByteWriter, key: string, m: MetaValue): void {
  w.str(key);
  switch (m.t) {
    case 'u32':
      w.u32(T_UINT32);
      w.u32(m.v);
      return;
    case 'f32':
      w.u32(T_FLOAT32);
      w.f32(m.v);
      return;
    case 'bool':
      w.u32(T_BOOL);
      w.raw(Buffer.from([m.v ? 1 : 0]));
      return;
    case 'str':
      w.u32(T_STRING);
      w.str(m.v);
      return;
    case 'strs':
      w.u32(T_ARRAY);
      w.u32(T_STRING);
      w.u64(m.v.length);
      for (const s of m.v) w.str(s);
      return;
    case 'f32s':
      w.u32(T_ARRAY);
      w.u32(T_FLOAT32);
      w.u64(m.v.length);
      for (const x of m.v) w.f32(x);
      return;
    case 'i32s':
      w.u32(T_ARRAY);
      w.u32(T_INT32);
      w.u64(m.v.length);
      for (const x of m.v) w.i32(x);
      return;
  }
}

interface TensorSpec {
  readonly name: string;
  /** ggml order: dims[0] is the fastest-moving (a row's length). */
  readonly dims: readonly number[];
  /** Fill: 'one' for norm weights, else uniform random in ±scale. */
  readonly fill: 'one' | number;
}

function tensorSpecs(s: TinyLlamaShape, vocab: number): TensorSpec[] {
  const headDim = s.embd / s.heads;
  const kv = headDim * s.kvHeads;
  // Uniform ±a has variance a²/3: a = sqrt(3/fanIn) keeps each layer's output at unit scale, so the
  // random network stays finite through every block.
  const a = (fanIn: number): number => Math.sqrt(3 / fanIn);
  const specs: TensorSpec[] = [
    { name: 'token_embd.weight', dims: [s.embd, vocab], fill: 1 },
    { name: 'output_norm.weight', dims: [s.embd], fill: 'one' },
    { name: 'output.weight', dims: [s.embd, vocab], fill: a(s.embd) },
  ];
  for (let i = 0; i < s.layers; i++) {
    const p = `blk.${i}.`;
    specs.push(
      { name: p + 'attn_norm.weight', dims: [s.embd], fill: 'one' },
      { name: p + 'attn_q.weight', dims: [s.embd, s.embd], fill: a(s.embd) },
      { name: p + 'attn_k.weight', dims: [s.embd, kv], fill: a(s.embd) },
      { name: p + 'attn_v.weight', dims: [s.embd, kv], fill: a(s.embd) },
      // Residual branches scaled down so the residual stream does not grow block by block.
      { name: p + 'attn_output.weight', dims: [s.embd, s.embd], fill: a(s.embd) / s.layers },
      { name: p + 'ffn_norm.weight', dims: [s.embd], fill: 'one' },
      { name: p + 'ffn_gate.weight', dims: [s.embd, s.ff], fill: a(s.embd) },
      { name: p + 'ffn_up.weight', dims: [s.embd, s.ff], fill: a(s.embd) },
      { name: p + 'ffn_down.weight', dims: [s.ff, s.embd], fill: a(s.ff) / s.layers },
    );
  }
  return specs;
}

/** xorshift32: seeded, fast, good enough for weights nobody reads. */
function uniformFill(out: Float32Array, scale: number, seed: number): void {
  let x = seed >>> 0 || 0x9e3779b9;
  for (let i = 0; i < out.length; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = (x / 0x100000000 - 0.5) * 2 * scale;
  }
}

const padTo = (n: number): number => Math.ceil(n / ALIGN) * ALIGN;

/** The parameter count of a shape (what prefill multiplies per token, twice). */
export function parameterCount(s: TinyLlamaShape): number {
  return tensorSpecs(s, tinyVocab().tokens.length).reduce((n, t) => n + t.dims.reduce((a, b) => a * b, 1), 0);
}

/** Writes the model to `path`; returns its size in bytes. */
export async function writeTinyLlamaGguf(path: string, shape: TinyLlamaShape = TINY_SHAPE): Promise<number> {
  if (shape.embd % shape.heads !== 0 || shape.heads % shape.kvHeads !== 0)
    throw new Error('embd must divide by heads, and heads by kvHeads');
  const { tokens, types } = tinyVocab();
  const specs = tensorSpecs(shape, tokens.length);
  const meta: [string, MetaValue][] = [
    ['general.architecture', { t: 'str', v: 'llama' }],
    ['general.name', { t: 'str', v: 'llmlb random tiny llama' }],
    ['general.alignment', { t: 'u32', v: ALIGN }],
    ['llama.context_length', { t: 'u32', v: shape.contextLength }],
    ['llama.embedding_length', { t: 'u32', v: shape.embd }],
    ['llama.block_count', { t: 'u32', v: shape.layers }],
    ['llama.feed_forward_length', { t: 'u32', v: shape.ff }],
    ['llama.attention.head_count', { t: 'u32', v: shape.heads }],
    ['llama.attention.head_count_kv', { t: 'u32', v: shape.kvHeads }],
    ['llama.attention.layer_norm_rms_epsilon', { t: 'f32', v: 1e-5 }],
    ['llama.rope.dimension_count', { t: 'u32', v: shape.embd / shape.heads }],
    ['llama.rope.freq_base', { t: 'f32', v: 10000 }],
    ['llama.vocab_size', { t: 'u32', v: tokens.length }],
    ['tokenizer.ggml.model', { t: 'str', v: 'llama' }],
    ['tokenizer.ggml.tokens', { t: 'strs', v: tokens }],
    ['tokenizer.ggml.scores', { t: 'f32s', v: tokens.map(() => 0) }],
    ['tokenizer.ggml.token_type', { t: 'i32s', v: types }],
    ['tokenizer.ggml.unknown_token_id', { t: 'u32', v: 0 }],
    ['tokenizer.ggml.bos_token_id', { t: 'u32', v: 1 }],
    ['tokenizer.ggml.eos_token_id', { t: 'u32', v: 2 }],
    ['tokenizer.ggml.add_bos_token', { t: 'bool', v: true }],
    ['tokenizer.ggml.add_eos_token', { t: 'bool', v: false }],
  ];

  const head = new ByteWriter();
  head.raw(Buffer.from('GGUF', 'ascii'));
  head.u32(3);
  head.u64(specs.length);
  head.u64(meta.length);
  for (const [k, v] of meta) writeMeta(head, k, v);
  let offset = 0;
  const offsets: number[] = [];
  for (const t of specs) {
    head.str(t.name);
    head.u32(t.dims.length);
    for (const d of t.dims) head.u64(d);
    head.u32(GGML_F32);
    head.u64(offset);
    offsets.push(offset);
    offset = padTo(offset + 4 * t.dims.reduce((a, b) => a * b, 1));
  }
  const header = head.bytes();
  const dataStart = padTo(header.length);

  const fh = await open(path, 'w');
  try {
    await fh.write(header, 0, header.length, 0);
    for (let i = 0; i < specs.length; i++) {
      const t = specs[i]!;
      const data = new Float32Array(t.dims.reduce((a, b) => a * b, 1));
      if (t.fill === 'one') data.fill(1);
      else uniformFill(data, t.fill, shape.seed * 7919 + i * 104729);
      const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
      await fh.write(bytes, 0, bytes.length, dataStart + offsets[i]!);
    }
    // The last tensor's padding: the file ends on an aligned boundary as llama.cpp's writer leaves it.
    const end = dataStart + offset;
    await fh.truncate(end);
    return end;
  } finally {
    await fh.close();
  }
}
