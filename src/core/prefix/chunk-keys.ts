/**
 * Chain hashes of a text's fixed-size character chunks (PrefixTrie.keys): key i covers chunks
 * 0..i, so equal keys mean (up to collisions) an equal prefix. Only equality matters: nothing
 * orders or stores keys across processes, so the function may change between versions.
 *
 * Speed matters (every request's prompt, up to maxPrefixChars, is hashed), so the text is copied
 * out by native code, never read with charCodeAt, and hashed a 32-bit word at a time in four
 * interleaved multiply–xor lanes: one multiply per word, and the CPU runs the lanes side by side
 * where a single chain would wait out each multiply's latency.
 *
 * - Fast path (chunk size a multiple of 4, indexed text all ASCII — almost every prompt): the text
 *   is UTF-8 encoded, one byte per character, and a word is four characters.
 * - General path (anything else): chunk by chunk, an all-ASCII chunk is packed into bytes and
 *   hashed exactly as the fast path hashes it (a text with one non-ASCII character late on still
 *   shares its leading chunks' keys with an all-ASCII one); any other chunk is hashed as UTF-16
 *   code units, two to a word, with a different lane seed.
 */

/** Keys are 53-bit: a well-mixed 32-bit high part times 2^21 plus 21 low bits. */
export const LOW_BITS = 0x200000;
/** Tweak of the lanes for a chunk hashed as UTF-16 (not byte-packed). */
const WIDE = 0x2545f491;

const encoder = new TextEncoder();
/** Scratch: the text (fast path: UTF-8 bytes; general path: UTF-16 units), then one staged chunk. */
let buffer = new ArrayBuffer(0);
let bytes = new Uint8Array(buffer);
let words = new Int32Array(buffer);
let units = new Uint16Array(buffer);
let writer = Buffer.from(buffer);
/**
 * Views of the scratch's first `chars` bytes, per `chars` (emptied when the scratch grows): the
 * encoder is offered just the bytes the keys need, so a long prompt whose first chunk alone is
 * hashed (PrefixCredit's head) is not encoded whole, with no view made per call.
 */
let heads = new Map<number, Uint8Array>();

/** The chain so far: two 32-bit halves, carried from chunk to chunk. */
let chainA = 0;
let chainB = 0;

/** Murmur3's 32-bit finaliser: every input bit reaches every output bit. */
function fmix(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  return x ^ (x >>> 16);
}

/** Hash `count` words from `from` onto the chain; returns the chunk's key. */
function mix(from: number, count: number, tweak: number): number {
  const w = words;
  let l0 = chainA ^ tweak;
  let l1 = chainB;
  let l2 = chainA ^ 0x9e3779b9;
  let l3 = chainB ^ 0x7f4a7c15;
  const end = from + count;
  let i = from;
  for (; i + 3 < end; i += 4) {
    l0 = Math.imul(l0 ^ w[i]!, 0x01000193);
    l1 = Math.imul(l1 ^ w[i + 1]!, 0x5bd1e995);
    l2 = Math.imul(l2 ^ w[i + 2]!, 0x85ebca6b);
    l3 = Math.imul(l3 ^ w[i + 3]!, 0xc2b2ae35);
  }
  for (; i < end; i++) l0 = Math.imul(l0 ^ w[i]!, 0x01000193);
  chainA = fmix(l0 ^ Math.imul(l3, 0x27d4eb2f));
  chainB = fmix((l1 ^ Math.imul(l2, 0x165667b1)) + chainA);
  return (chainA >>> 0) * LOW_BITS + (chainB & (LOW_BITS - 1));
}

function reserve(byteLength: number): void {
  if (buffer.byteLength >= byteLength) return;
  buffer = new ArrayBuffer(Math.max((byteLength + 3) & ~3, buffer.byteLength * 2));
  bytes = new Uint8Array(buffer);
  words = new Int32Array(buffer);
  units = new Uint16Array(buffer);
  writer = Buffer.from(buffer);
  heads = new Map();
}

/** Writes the keys of `text`'s first `out.length` chunks of `size` characters into `out`. */
export function chunkKeys(text: string, size: number, out: Float64Array): void {
  const n = out.length;
  if (n === 0) return;
  const chars = n * size;
  chainA = 0x811c9dc5;
  chainB = 0x01000193;
  if (size % 4 === 0) {
    reserve(chars);
    // The first `chars` characters are all ASCII exactly when they were all read and every
    // character read took one byte.
    let view = heads.get(chars);
    if (view === undefined) {
      view = bytes.subarray(0, chars);
      heads.set(chars, view);
    }
    const r = encoder.encodeInto(text, view);
    if (r.read >= chars && r.read === r.written) {
      const step = size >> 2;
      for (let b = 0; b < n; b++) out[b] = mix(b * step, step, 0);
      return;
    }
  }
  // General path: UTF-16 units first, then each chunk staged after them as words.
  const packed = (size + 3) >> 2;
  const wide = (size + 1) >> 1;
  const unitsEnd = (chars * 2 + 3) & ~3;
  reserve(unitsEnd + wide * 4);
  writer.write(text, 0, chars * 2, 'utf16le');
  const u = units;
  const stage = unitsEnd >> 2;
  const stageBytes = bytes.subarray(unitsEnd, unitsEnd + wide * 4);
  const stageUnits = units.subarray(unitsEnd >> 1, (unitsEnd >> 1) + wide * 2);
  for (let b = 0; b < n; b++) {
    const from = b * size;
    let high = 0;
    for (let i = from; i < from + size; i++) high |= u[i]!;
    if (high < 0x80) {
      // Bytes as the fast path has them (same endianness: the same word view reads them).
      stageBytes.fill(0, 0, packed * 4);
      for (let i = 0; i < size; i++) stageBytes[i] = u[from + i]!;
      out[b] = mix(stage, packed, 0);
    } else {
      stageUnits.fill(0);
      stageUnits.set(u.subarray(from, from + size));
      out[b] = mix(stage, wide, WIDE);
    }
  }
}
