/**
 * Prompts known only by their length and a chain of block ids (Mooncake `hash_ids`, llmlb's own
 * capture): no text was recorded, and materialising e.g. 100k-token prompts as text would cost
 * memory and hashing time in proportion to the trace. Such a request carries
 *   - `promptTokens`: its exact length (the simulator uses it instead of counting the text), and
 *   - `prefixBlocks`: one chain hash per trace block (equal hash i ⇔ equal first i+1 blocks),
 * plus a short stand-in text for the router (one character per STAND_IN_TOKENS_PER_CHAR tokens),
 * built from the same chain hashes, so requests sharing trace blocks share a text prefix that the
 * prefix policies (trie, prefix-cache scorer, consistent hashing) see, and length-based estimators
 * see a length proportional to the prompt.
 */
import type { BlockHash } from '../engine/tokens.js';
import type { PrefixBlocks } from './types.js';

/** Tokens one character of a stand-in text represents (a 512-token Mooncake block is 64 chars). */
export const STAND_IN_TOKENS_PER_CHAR = 8;

/** 53-bit mix of a chain state and a value (two Math.imul lanes, as in engine/tokens.ts). */
function mix(state: number, value: number): number {
  const lo = state >>> 0;
  const hi = Math.floor(state / 0x100000000) >>> 0;
  let h1 = 0xdeadbeef ^ lo ^ value;
  let h2 = 0x41c6ce57 ^ hi ^ Math.floor(value / 0x100000000);
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (h2 >>> 0) * 0x200000 + ((h1 >>> 0) & 0x1fffff);
}

/** A string id as a number (FNV-1a over its characters), so string and numeric ids chain alike. */
function idValue(id: string | number): number {
  if (typeof id === 'number') return id;
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * Chain hashes of a trace's block ids: hash i covers ids 0..i, so requests agree on hash i exactly
 * when they agree on their first i+1 ids (whether or not the trace's ids were already chained).
 */
export function chainBlockIds(ids: readonly (string | number)[]): number[] {
  const out = new Array<number>(ids.length);
  let h = 0;
  for (let i = 0; i < ids.length; i++) out[i] = h = mix(h, idValue(ids[i]!));
  return out;
}

/** A unique chain state for a request's blocks that no trace id covers (seeded by its id). */
export function uniqueState(requestId: string, seed: number): number {
  return mix(mix(seed, 0x7ace), idValue(requestId));
}

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const ALPHABET_CODES = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));

/**
 * The stand-in texts are written as bytes into one growing scratch buffer and read out as one
 * latin1 string per request (the characters are ASCII): no string per block, no joins.
 */
let scratch = Buffer.allocUnsafe(4096);

/**
 * Write `chars` characters for `state` at `at`: 10 base-32 characters from the state, repeated,
 * so all of a block's characters depend on its hash. Returns the end offset.
 */
function writeStandIn(state: number, chars: number, at: number): number {
  if (at + chars > scratch.length) {
    const bigger = Buffer.allocUnsafe(Math.max(scratch.length * 2, at + chars));
    scratch.copy(bigger, 0, 0, at);
    scratch = bigger;
  }
  const buf = scratch;
  let v = state;
  const word = Math.min(10, chars);
  for (let i = 0; i < word; i++) {
    buf[at + i] = ALPHABET_CODES[v % 32]!;
    v = Math.floor(v / 32);
  }
  for (let i = word; i < chars; i++) buf[at + i] = buf[at + i - 10]!;
  return at + chars;
}

/**
 * The router's stand-in text for a prompt of `promptTokens` tokens: block i (blockTokens tokens,
 * the last one possibly partial) becomes ceil(tokens/8) characters drawn from its chain hash;
 * tokens past the trace's blocks draw from `tail` (unique to the request).
 */
export function standInText(blocks: PrefixBlocks, promptTokens: number, tail: number): string {
  const { blockTokens, chain } = blocks;
  let covered = 0;
  let at = 0;
  for (let i = 0; i < chain.length && covered < promptTokens; i++) {
    const tokens = Math.min(blockTokens, promptTokens - covered);
    at = writeStandIn(chain[i]!, Math.ceil(tokens / STAND_IN_TOKENS_PER_CHAR), at);
    covered += tokens;
  }
  if (covered < promptTokens)
    at = writeStandIn(tail, Math.ceil((promptTokens - covered) / STAND_IN_TOKENS_PER_CHAR), at);
  return scratch.toString('latin1', 0, at);
}

/**
 * The engine's prompt-block hashes (blockSize tokens each, full blocks only, as
 * engine/tokens.ts's promptBlockHashes gives for text) for a request known by its trace blocks:
 * engine block e ends at token (e+1)·blockSize, inside trace block k; its hash is trace block k's
 * chain hash mixed with that offset, so two requests share engine block e exactly when they share
 * the trace blocks it reaches into. Past the trace's blocks, `tail` (unique to the request) is used.
 */
export function engineBlockHashes(
  blocks: PrefixBlocks,
  promptTokens: number,
  tail: number,
  blockSize: number,
): BlockHash[] {
  const size = Math.floor(blockSize);
  if (size <= 0) return [];
  const n = Math.floor(promptTokens / size);
  const out = new Array<BlockHash>(n);
  const { blockTokens, chain } = blocks;
  let e = 0;
  for (let k = 0; e < n; k++) {
    const lastEnd = Math.min((k + 1) * blockTokens, n * size);
    const state = k < chain.length ? chain[k]! : mix(tail, k);
    // mix(state, off) for the offsets of the engine blocks ending in trace block k, with the
    // state's half of mix worked out once (off < 2^32: its high word is 0).
    const lo = state >>> 0;
    const h2 = 0x41c6ce57 ^ (Math.floor(state / 0x100000000) >>> 0);
    const h1State = 0xdeadbeef ^ lo;
    const h2For1 = Math.imul(h2 ^ (h2 >>> 13), 3266489909);
    const h2Self = Math.imul(h2 ^ (h2 >>> 16), 2246822507);
    const base = k * blockTokens;
    for (; e < n && (e + 1) * size <= lastEnd; e++) {
      const off = (e + 1) * size - base;
      if (off >= 0x100000000) {
        out[e] = mix(state, off);
        continue;
      }
      let h1 = h1State ^ off;
      h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ h2For1;
      const h = h2Self ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
      out[e] = (h >>> 0) * 0x200000 + ((h1 >>> 0) & 0x1fffff);
    }
    // An engine block that straddles trace blocks k and k+1 ends in k+1: handled next round.
  }
  return out;
}
